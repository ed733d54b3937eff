"""How an HTTP server signs in, as a form in the server dialog.

The form edits a server's sign-in settings (``ServerConfig.auth``, nothing secret in them:
the grant, the client id, the scope, DPoP, an assertion file's path) and takes the secrets
that go with them apart: a client secret typed in a password field, a private key imported
from a PEM file, an identity provider's client secret. Those go to the engine as the
server's ``credentials`` and from there to the keyring only; a secret already kept is never
shown back, only replaced when the person types or imports a new one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QWidget,
)

from hostapp.ui.result_view import plain_label

AUTHORIZATION_CODE = "authorization_code"
CLIENT_CREDENTIALS = "client_credentials"
JWT_BEARER = "jwt_bearer"
IDENTITY_ASSERTION = "identity_assertion"

#: The grants a server may sign in with (hostapp.auth.settings), as a person reads them.
GRANTS = {
    AUTHORIZATION_CODE: "A person signs in in the browser",
    CLIENT_CREDENTIALS: "This computer signs in with its own credentials (client credentials)",
    JWT_BEARER: "A workload identity token signs in (JWT bearer)",
    IDENTITY_ASSERTION: "The organisation's identity provider signs in (enterprise-managed)",
}

#: The fields of ``ServerConfig.auth`` this form edits; the others a configuration holds
#: (a token endpoint, a signing algorithm) are kept as they are.
EDITED = ("grant", "client_id", "scope", "dpop", "assertion_file", "idp_token_endpoint", "idp_client_id",
          "client_auth")

KEPT = "kept in the keyring; type a new one to replace it"


class SignInForm(QWidget):
    """Grant, client id, secret or private key, assertion file, scope and DPoP of one server."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._original: dict[str, Any] = {}
        self._pem: str | None = None
        self._file_dialog: QFileDialog | None = None

        self.grant = QComboBox()
        self.grant.setAccessibleName("How the server signs in")
        for key, label in GRANTS.items():
            self.grant.addItem(label, key)
        self.client_id = QLineEdit()
        self.client_id.setAccessibleName("Client ID")
        self.client_id.setPlaceholderText("optional for a person's sign-in: registered automatically")
        self.secret = QLineEdit()
        self.secret.setAccessibleName("Client secret")
        self.secret.setEchoMode(QLineEdit.EchoMode.Password)
        self.secret.setPlaceholderText("a client secret, if the server issued one")
        self.key_label = plain_label("", selectable=False)
        self.key_label.setAccessibleName("Private key")
        self.import_key = QPushButton("Import PEM file…")
        self.import_key.setAccessibleName("Import a private key from a PEM file")
        self.import_key.clicked.connect(self._choose_key)
        self.assertion_file = QLineEdit()
        self.assertion_file.setAccessibleName("Assertion file")
        self.assertion_file.setPlaceholderText("a file the platform keeps the workload's token in")
        choose_assertion = QPushButton("Choose…")
        choose_assertion.setAccessibleName("Choose the assertion file")
        choose_assertion.clicked.connect(self._choose_assertion)
        self.idp_token_endpoint = QLineEdit()
        self.idp_token_endpoint.setAccessibleName("Identity provider token endpoint")
        self.idp_token_endpoint.setPlaceholderText("https://idp.example.com/oauth2/token")
        self.idp_client_id = QLineEdit()
        self.idp_client_id.setAccessibleName("Client ID at the identity provider")
        self.idp_secret = QLineEdit()
        self.idp_secret.setAccessibleName("Client secret at the identity provider")
        self.idp_secret.setEchoMode(QLineEdit.EchoMode.Password)
        self.scope = QLineEdit()
        self.scope.setAccessibleName("Scope")
        self.scope.setPlaceholderText("what the server asks for, when empty")
        self.dpop = QCheckBox("Bind the tokens to a key of this computer (DPoP)")
        self.dpop.setAccessibleName("Use DPoP")

        key_row = QWidget()
        krow = QHBoxLayout(key_row)
        krow.setContentsMargins(0, 0, 0, 0)
        krow.addWidget(self.key_label, 1)
        krow.addWidget(self.import_key)
        assertion_row = QWidget()
        arow = QHBoxLayout(assertion_row)
        arow.setContentsMargins(0, 0, 0, 0)
        arow.addWidget(self.assertion_file, 1)
        arow.addWidget(choose_assertion)

        form = QFormLayout(self)
        form.addRow("&Sign-in:", self.grant)
        form.addRow("Client &ID:", self.client_id)
        form.addRow("Client s&ecret:", self.secret)
        form.addRow("Private &key:", key_row)
        form.addRow("Assertion &file:", assertion_row)
        form.addRow("Identity pro&vider:", self.idp_token_endpoint)
        form.addRow("Its client I&D:", self.idp_client_id)
        form.addRow("Its client secre&t:", self.idp_secret)
        form.addRow("Sco&pe:", self.scope)
        form.addRow("", self.dpop)
        self._form = form
        self._rows = {"secret": self.secret, "key": key_row, "assertion": assertion_row,
                      "idp": self.idp_token_endpoint, "idp_id": self.idp_client_id, "idp_secret": self.idp_secret}
        self.grant.currentIndexChanged.connect(self._grant_changed)
        self._show_key_state()
        self._grant_changed()

    # -- filling and reading ----------------------------------------------------------------

    def fill(self, auth: dict[str, Any] | None) -> None:
        """Show a server's settings; its secrets stay in the keyring (the fields say so)."""
        self._original = dict(auth or {})
        grant = self._original.get("grant", AUTHORIZATION_CODE)
        self.grant.setCurrentIndex(max(0, self.grant.findData(grant)))
        self.client_id.setText(self._original.get("client_id") or "")
        self.scope.setText(self._original.get("scope") or "")
        self.dpop.setChecked(bool(self._original.get("dpop")))
        self.assertion_file.setText(self._original.get("assertion_file") or "")
        self.idp_token_endpoint.setText(self._original.get("idp_token_endpoint") or "")
        self.idp_client_id.setText(self._original.get("idp_client_id") or "")
        if self._original.get("client_id"):
            # A configured client may have a secret in the keyring: never shown, only replaced.
            self.secret.setPlaceholderText(f"if one is {KEPT}")
            self.idp_secret.setPlaceholderText(f"if one is {KEPT}")
        self._show_key_state()

    def settings(self) -> tuple[dict[str, Any] | None, dict[str, str]]:
        """(the sign-in settings, nothing secret; None for the defaults) and the new secrets
        for the keyring. ValueError, in words for the person, when they cannot work."""
        grant = self.grant.currentData()
        auth = {k: v for k, v in self._original.items() if k not in EDITED}
        credentials: dict[str, str] = {}
        values = {
            "grant": grant,
            "client_id": self.client_id.text().strip(),
            "scope": self.scope.text().strip(),
            "dpop": self.dpop.isChecked(),
        }
        if grant == JWT_BEARER:
            values["assertion_file"] = self.assertion_file.text().strip()
            if values["assertion_file"] and not Path(values["assertion_file"]).expanduser().is_absolute():
                raise ValueError("The assertion file must be given with its full path.")
        if grant == IDENTITY_ASSERTION:
            values["idp_token_endpoint"] = self.idp_token_endpoint.text().strip()
            values["idp_client_id"] = self.idp_client_id.text().strip()
            if not values["idp_token_endpoint"].startswith(("https://", "http://")):
                raise ValueError("Enter the identity provider's token endpoint (an https:// URL).")
            if self.idp_secret.text():
                credentials["idp_client_secret"] = self.idp_secret.text()
        if grant != AUTHORIZATION_CODE and not values["client_id"]:
            raise ValueError("This way of signing in needs the client ID the server's administrator gave you.")
        client_auth = self._original.get("client_auth")
        if self.secret.text() and grant != JWT_BEARER:
            credentials["client_secret"] = self.secret.text()
            client_auth = None if client_auth == "private_key_jwt" else client_auth
        if self._pem is not None:
            credentials["private_key"] = self._pem
            client_auth = "private_key_jwt"
        if client_auth:
            values["client_auth"] = client_auth
        if credentials and not values["client_id"]:
            raise ValueError("A client secret or private key needs the client ID it belongs to.")
        auth.update({k: v for k, v in values.items() if v not in ("", None, False)})
        if auth.get("grant") == AUTHORIZATION_CODE:
            del auth["grant"]  # the default
        return (auth or None), credentials

    def import_key_file(self, path: Path) -> None:
        """Read a PEM private key to import (into the keyring, when the server is saved)."""
        try:
            pem = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"Cannot read {path}: {exc}") from None
        if "PRIVATE KEY-----" not in pem:
            raise ValueError(f"{Path(path).name} is not a PEM private key.")
        self._pem = pem
        self._show_key_state(Path(path).name)

    # -- the widgets ----------------------------------------------------------------------

    def _show_key_state(self, imported: str | None = None) -> None:
        if imported is not None:
            self.key_label.setText(f"{imported}: goes to the keyring when you save")
        elif self._original.get("client_auth") == "private_key_jwt":
            self.key_label.setText(f"A private key is {KEPT.replace('type', 'import')}")
        else:
            self.key_label.setText("None (a key signs in instead of a secret)")

    def _grant_changed(self, *_: Any) -> None:
        grant = self.grant.currentData()
        shown = {
            "secret": grant in (AUTHORIZATION_CODE, CLIENT_CREDENTIALS, IDENTITY_ASSERTION),
            "key": grant in (CLIENT_CREDENTIALS, IDENTITY_ASSERTION),
            "assertion": grant == JWT_BEARER,
            "idp": grant == IDENTITY_ASSERTION,
            "idp_id": grant == IDENTITY_ASSERTION,
            "idp_secret": grant == IDENTITY_ASSERTION,
        }
        for name, widget in self._rows.items():
            self._form.setRowVisible(widget, shown[name])

    def _choose_key(self) -> None:
        self._open_file("Import a private key (PEM)", "PEM files (*.pem *.key);;All files (*)", self._key_chosen)

    def _key_chosen(self, path: str) -> None:
        try:
            self.import_key_file(Path(path))
        except ValueError as exc:
            self.key_label.setText(str(exc))

    def _choose_assertion(self) -> None:
        self._open_file("Choose the assertion file", "All files (*)", self.assertion_file.setText)

    def _open_file(self, title: str, name_filter: str, chosen: Any) -> None:
        dialog = QFileDialog(self, title)
        dialog.setNameFilter(name_filter)
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(chosen)
        self._file_dialog = dialog
        dialog.open()
