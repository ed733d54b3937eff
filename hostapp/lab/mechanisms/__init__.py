"""The lab's side of each resume mechanism, one module each (as :mod:`hostapp.mechanisms`
is the host's side).

===================  ==============================================  ====================
module               mechanism                                       tool
===================  ==============================================  ====================
``sse``              a plain call on a resumable SSE stream           ``sleep_with_progress``,
                     (``Last-Event-ID`` replay)                       ``long_sse``
``tasks_2025``       2025-11-25 tasks (SEP-1686)                      ``long_task``
``tasks_extension``  the 2026-07-28 tasks extension (SEP-2663)        ``long_task_ext``
``mrtr``             multi round-trip requests (``requestState``)     ``long_mrtr``
``resume_token``     answers in slices with ``nextResumeToken``       ``long_resume_token``
``streams``          draft resumable streams (``stream/*``)           ``long_stream``
``resumable``        resumable requests (SEP-975, ``requests/*``)     ``long_resumable``
``async_tools``      asynchronous tool calls (SEP-1391)               ``long_async``
===================  ==============================================  ====================

Each module has one :class:`~hostapp.lab.mechanisms.base.LabMechanism`: the tools that
start the mechanism, the methods a client comes back with, and what its jobs do when they
end. :class:`hostapp.lab.core.LabCore` builds them and dispatches to them; what they share
(stored streams, jobs, questions to the client) stays in the core.
"""
