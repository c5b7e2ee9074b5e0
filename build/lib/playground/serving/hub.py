"""Share a package on the Hugging Face Hub: a model card with the Hub's metadata header, and the upload.

Only `push_package` touches the network, through a `huggingface_hub.HfApi` (a test passes its own object).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from playground.errors import PlaygroundError

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
TRANSFORMERS_DIR = "transformers"  # where the optional transformers export goes inside the Hub repo
LANGUAGE = re.compile(r"^[a-z]{2,3}([_-][A-Za-z0-9]{2,8})*$")  # "en", "de", "pt-BR", "zh_Hans": an ISO code
PLACEHOLDER_LANGUAGES = {"src", "tgt"}  # what a package says when nobody named the languages


def card_metadata(config: dict, training: dict | None, transformers_folder: bool, license: str | None = None):
    """huggingface_hub's ModelCardData: languages, pipeline_tag, library_name, license (only when given), metrics."""
    from huggingface_hub import EvalResult, ModelCardData

    languages = [lang for lang in (config.get("src_lang"), config.get("tgt_lang")) 
                 if lang and LANGUAGE.match(lang) and lang not in PLACEHOLDER_LANGUAGES]
    best = (training or {}).get("best") or {}
    dataset = ((training or {}).get("data") or {}).get("description", "user data")
    results = [EvalResult(task_type="translation", dataset_type=dataset, dataset_name=dataset, metric_type=metric,
                          metric_value=round(float(best[metric]), 2))
               for metric in ("bleu", "chrf") if isinstance(best.get(metric), (int, float))]
    return ModelCardData(
        language=languages or None, license=license or None, pipeline_tag="translation",
        library_name="transformers" if transformers_folder else "transformer-playground",
        tags=["translation", "transformer-playground"], metrics=[r.metric_type for r in results] or None,
        model_name=config["name"], eval_results=results or None)


def hub_card(config: dict, training: dict | None, transformers_folder: bool = False, repo_id: str | None = None,
             license: str | None = None) -> str:
    """The package's model card with the Hub's metadata header and usage snippets: for this project and, for a
    transformers folder (or a repo that carries one in transformers/), for 🤗 transformers."""
    from playground.packages.store import model_card

    name = repo_id or config["name"]
    body = model_card(config, training).replace(f'load_package("models/{config["name"]}")',
                                                f'load_package("{config["name"]}")')
    joint = (config.get("tokenizer") or {}).get("joint", True)
    where = f'"{name}"' if transformers_folder else f'"{name}", subfolder="{TRANSFORMERS_DIR}"'
    decode_with = "tokenizer" if joint else "target_tokenizer"
    snippet = ["", "## Use it with 🤗 transformers", "", "```python",
               "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
               f"model = AutoModelForSeq2SeqLM.from_pretrained({where})",
               f"tokenizer = AutoTokenizer.from_pretrained({where})"]
    if not joint:
        sub = "target_tokenizer" if transformers_folder else f"{TRANSFORMERS_DIR}/target_tokenizer"
        snippet.append(f'target_tokenizer = AutoTokenizer.from_pretrained("{name}", subfolder="{sub}")  # separate vocabulary')
    snippet += ['batch = tokenizer(["your sentence"], return_tensors="pt", padding=True)',
                "out = model.generate(**batch, num_beams=5)  # num_beams=1: greedy",
                f"print({decode_with}.batch_decode(out, skip_special_tokens=True))", "```", ""]
    playground_use = ["", "Download the package (`huggingface_hub.snapshot_download`) and load it with this project:"
                      " `python -m playground translate --model FOLDER \"your sentence\"`.", ""]
    metadata = card_metadata(config, training, transformers_folder, license).to_yaml()
    if not license:
        metadata += "\n# license: choose one (https://huggingface.co/docs/hub/repositories-licenses) and add it here"
    carries_transformers = transformers_folder or repo_id is not None
    return "---\n" + metadata + "\n---\n\n" + body + "\n".join(playground_use + (snippet if carries_transformers else []))


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
    token = oauth_token or os.environ.get("HF_TOKEN")
    if not token:
        raise PlaygroundError("Sign in with Hugging Face first (the button above), or set the HF_TOKEN environment "
                              "variable to a token with write access (huggingface.co/settings/tokens).")
    return token


def stage_upload(package_folder: Path, dest: Path, repo_id: str, with_transformers: bool, license: str | None) -> None:
    """Lay out what the repo receives: the package files, the card, and optionally the transformers export."""
    from playground.packages.store import ALLOWED, CARD, RESUME_STATE, RESUME_TENSORS, package_info

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
