"""Qt widgets for the two kinds of form a server asks the person to fill in.

:mod:`.elicitation` renders the flat fields of a form-mode elicitation
(:mod:`hostapp.protocol.elicitation`); :mod:`.tool_arguments` renders the tree a tool's
``inputSchema`` becomes (:mod:`hostapp.protocol.schema_form`); :mod:`.widgets` holds the
plain-text labels both are made of.
"""

from hostapp.ui.forms.elicitation import ElicitationForm
from hostapp.ui.forms.tool_arguments import ToolArgumentsForm
from hostapp.ui.forms.widgets import NOT_SET, plain_label

__all__ = ["NOT_SET", "ElicitationForm", "ToolArgumentsForm", "plain_label"]
