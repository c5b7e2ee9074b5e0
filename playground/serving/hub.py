"""Share a package on the Hugging Face Hub: the repo id, the token, and the upload of the package with its Hub card
(playground.packages.card.hub_card).

Only `push_package` touches the network, through a `huggingface_hub.HfApi` (a test passes its own object).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from playground.errors import PlaygroundError
from playground.packages.card import TRANSFORMERS_DIR, hub_card
from playground.packages.format import ALLOWED, CARD, RESUME_STATE, RESUME_TENSORS
from playground.packages.store import package_info
from playground.settings import env_str

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


def check_repo_id(repo_id: str, namespace: str | None = None) -> str:
    """A full repo id; a bare model name goes to `namespace` (the signed-in visitor's account) when there is one."""
    repo_id = (repo_id or "").strip()
    if namespace and "/" not in repo_id:
        repo_id = f"{namespace}/{repo_id}"
    if not REPO_ID.match(repo_id):
        raise PlaygroundError(f"{repo_id!r} is not a Hub repo id: write it as your-user-name/model-name (letters, "
                              "digits, '-', '_', '.').")
    return repo_id


# OAuth scopes that may create a repo (huggingface.co/docs/hub/oauth): contribute-repos creates repos and writes those
# this app created, nothing else of the visitor's; manage-repos may also delete any. write-repos only reads and
# writes existing repos. The README's front matter asks for the narrowest: contribute-repos.
CREATE_SCOPES = ("contribute-repos", "manage-repos")


def check_scope(scope: str | None) -> None:
    """Refuse, before any request, a sign-in whose token cannot create the repo (the Hub would answer 401/403)."""
    if scope is not None and not set(scope.split()) & set(CREATE_SCOPES):
        raise PlaygroundError("This Space's sign-in cannot create repos on your account (its scopes: "
                              f"{scope or 'none'}). Its owner must add contribute-repos to hf_oauth_scopes in the "
                              "README's front matter; then sign out and in again.")


def hub_token(oauth_token: str | None = None, shared: bool = False) -> str:
    """The signed-in visitor's token; on a person's own machine (not `shared`) HF_TOKEN from the environment too.
    A shared app never lends its operator's HF_TOKEN: any visitor could push with it."""
    if shared:
        if not oauth_token:
            raise PlaygroundError("Sign in with Hugging Face first (the button above) to push to your own account: "
                                  "this shared app never uploads with its operator's token.")
        return oauth_token
    token = oauth_token or env_str("HF_TOKEN")
    if not token:
        raise PlaygroundError("Sign in with Hugging Face first (the button above), or set the HF_TOKEN environment "
                              "variable to a token with write access (huggingface.co/settings/tokens).")
    return token


def stage_upload(package_folder: Path, dest: Path, repo_id: str, with_transformers: bool, license: str | None) -> None:
    """Lay out what the repo receives: the package files, the card, and optionally the transformers export."""
    info = package_info(package_folder)
    for name in sorted(ALLOWED - {RESUME_TENSORS, RESUME_STATE, CARD}):  # the resume state stays on this machine
        if (package_folder / name).is_file():
            shutil.copy2(package_folder / name, dest / name)
    card = hub_card(info["config"], info["training"], repo_id=repo_id if with_transformers else None, license=license)
    (dest / CARD).write_text(card, encoding="utf-8")
    if with_transformers:
        from playground.export.transformers import export_transformers

        export_transformers(package_folder, dest / TRANSFORMERS_DIR)


def push_package(package_folder: str | os.PathLike, repo_id: str, token: str, private: bool = True,
                 with_transformers: bool = False, license: str | None = None, api=None,
                 namespace: str | None = None) -> str:
    """Create the model repo (or reuse one this token may write) and upload the package in one commit; returns the
    repo's URL. A bare repo name goes to `namespace`, the signed-in visitor's account."""
    repo_id = check_repo_id(repo_id, namespace)
    package_folder = Path(package_folder)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="hub-upload-") as staging:
        stage_upload(package_folder, Path(staging), repo_id, with_transformers, license)  # fails before any upload
        try:
            api.create_repo(repo_id=repo_id, repo_type="model", private=private, exist_ok=True)
            api.upload_folder(repo_id=repo_id, repo_type="model", folder_path=staging,
                              commit_message=f"Upload {package_folder.name} from Transformer Playground")
        except Exception as err:  # huggingface_hub raises HTTP, connection and validation errors alike
            status = getattr(getattr(err, "response", None), "status_code", None)
            hint = (" A Space's sign-in may write only to repos it created for you: choose a new repo name."
                    if status in (401, 403) else "")
            raise PlaygroundError(f"The Hub refused the upload to {repo_id}: {err}{hint}") from err
    return f"https://huggingface.co/{repo_id}"
