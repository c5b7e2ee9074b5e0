"""A Marian checkpoint (OPUS-MT) fetched from the Hugging Face Hub by its repo id, to import: only the files the import
reads (playground.packages.marian.MARIAN_FILES, and the README for its license), their sizes checked from the Hub's
metadata before anything is downloaded, the architecture and the parameters from config.json (a few hundred bytes,
fetched first) before the weights.

Only `fetch_marian` touches the network, through a `huggingface_hub.HfApi` (a test passes its own object); nothing
else in the app goes online. Where the Hub cannot be reached (no internet), the refusal says so and what to do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from playground import limits
from playground.errors import PackageError
from playground.packages.marian import MARIAN_FILES, PICKLED_WEIGHTS, marian_file_bytes, marian_parameters
from playground.packages.names import safe_stem
from playground.packages.zips import install, staging
from playground.serving.hub import REPO_ID

CONFIG_BYTES = 64 * 1024  # a Marian config.json is about 1.5 kB
README = "README.md"  # the model card: the license the package's card repeats
OFFLINE = ("The Hugging Face Hub cannot be reached from this machine (it has no internet connection). Download the "
           "model's folder where there is one, zip it, and upload the zip instead.")


@dataclass(frozen=True)
class HubCheckpoint:
    """What the Hub says of a repo before anything is downloaded: the files to fetch and their sizes."""

    repo_id: str
    sizes: dict  # file name -> bytes, of the files the import reads

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes.values())

    @property
    def default_name(self) -> str:
        """A package name a translator recognises: the repo's name (opus-mt-en-de)."""
        return safe_stem(self.repo_id.split("/")[-1])


def checked_repo_id(repo_id: str | None) -> str:
    repo_id = repo_id.strip() if isinstance(repo_id, str) else ""  # an API client may send any JSON value
    if not REPO_ID.match(repo_id):
        raise PackageError(f"{repo_id[:100]!r} is not a Hub model id: write it as owner/name, e.g. "
                           "Helsinki-NLP/opus-mt-en-de.")
    return repo_id


def hub_api(api=None):
    if api is not None:
        return api
    from huggingface_hub import HfApi

    return HfApi(token=False)  # never the Space's own token (HF_TOKEN): a stranger reaches only public repos


def refusal(err: Exception, repo_id: str) -> PackageError:
    """What went wrong at the Hub, for people: no internet, no such repo, a gated one, or the Hub's own answer."""
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    if isinstance(err, GatedRepoError):
        return PackageError(f"{repo_id} is gated on the Hub (its owner must grant access): choose an open model.")
    if isinstance(err, RepositoryNotFoundError):
        return PackageError(f"There is no model {repo_id} on the Hub (or it is private): check its spelling on "
                            "huggingface.co, e.g. Helsinki-NLP/opus-mt-en-de.")
    if isinstance(err, HfHubHTTPError):
        return PackageError(f"The Hub answered with an error for {repo_id} ({str(err)[:200]}); try again later.")
    if isinstance(err, ValueError):  # huggingface_hub's HFValidationError: an id the Hub cannot have
        return PackageError(f"{repo_id[:100]!r} is not a valid Hub model id: write it as owner/name, e.g. "
                            "Helsinki-NLP/opus-mt-en-de.")
    return PackageError(OFFLINE)  # no connection: an OSError, or the HTTP client's own connect error


def checkpoint_on_hub(repo_id: str | None, api=None) -> HubCheckpoint:
    """The repo's files and sizes from the Hub's metadata (nothing downloaded): PackageError when it lacks a file the
    import needs (its weights only as a pickle included), or cannot be reached."""
    repo_id = checked_repo_id(repo_id)
    try:
        info = hub_api(api).model_info(repo_id, files_metadata=True)
    except Exception as err:  # huggingface_hub raises HTTP, connection and validation errors alike
        raise refusal(err, repo_id) from None
    sizes = {s.rfilename: s.size for s in info.siblings or []}
    missing = [name for name in MARIAN_FILES if name not in sizes]
    if "model.safetensors" in missing and PICKLED_WEIGHTS in sizes:
        raise PackageError(f"{repo_id} holds its weights only as {PICKLED_WEIGHTS} (a Python pickle, which can run "
                           "code when read; the playground reads no pickle). Choose a repo with model.safetensors, or "
                           "convert this one where transformers is installed and upload it as a zip.")
    if missing:
        raise PackageError(f"{repo_id} is not a 🤗 transformers Marian checkpoint: it lacks {', '.join(missing)}. The "
                           "playground imports Marian translation models (OPUS-MT), e.g. Helsinki-NLP/opus-mt-en-de.")
    wanted = (*MARIAN_FILES, *((README,) if README in sizes else ()))
    unsized = [name for name in wanted if sizes[name] is None]
    if unsized:  # a size the Hub does not say cannot be checked before it is downloaded
        raise PackageError(f"The Hub did not say the size of {', '.join(unsized)} in {repo_id}; try again later.")
    weights = sizes["model.safetensors"]
    if weights > limits.max_file_bytes("model.safetensors"):
        raise PackageError(f"{repo_id}'s weights are {weights / 1e6:,.0f} MB; this app loads models of at most "
                           f"{limits.max_parameters() / 1e6:,.0f} M parameters. Choose a smaller model.")
    oversized = [name for name in wanted if sizes[name] > marian_file_bytes(name)]
    if oversized:
        raise PackageError(f"{repo_id}'s {', '.join(oversized)} is larger than a Marian checkpoint's; it was not "
                           "downloaded.")
    return HubCheckpoint(repo_id, {name: sizes[name] for name in wanted})


def fetch_marian(checkpoint: HubCheckpoint, folder: Path, api=None,
                 progress: Callable[[float, str], object] | None = None) -> int:
    """Download the checkpoint's files into `folder`: config.json first, whose architecture and parameters are
    checked (against PLAYGROUND_MAX_PARAMETERS) before the weights are fetched. Returns the model's parameters;
    `progress(share, what)` hears of each file."""
    api, repo_id = hub_api(api), checkpoint.repo_id
    folder.mkdir(parents=True, exist_ok=True)
    done, total = 0, max(checkpoint.total_bytes, 1)

    def fetch(name: str) -> Path:
        nonlocal done
        if progress:
            progress(done / total, f"Downloading {name} ({checkpoint.sizes[name] / 1e6:,.1f} MB)")
        try:
            path = Path(api.hf_hub_download(repo_id=repo_id, filename=name, local_dir=folder))
        except Exception as err:  # as in checkpoint_on_hub
            raise refusal(err, repo_id) from None
        if path.stat().st_size != checkpoint.sizes[name]:
            raise PackageError(f"{name} of {repo_id} is not the size the Hub listed; try again.")
        done += checkpoint.sizes[name]
        return path

    config_path = fetch("config.json")
    if config_path.stat().st_size > CONFIG_BYTES:
        raise PackageError(f"config.json of {repo_id} is larger than a Marian config ({CONFIG_BYTES // 1024} kB).")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise PackageError(f"config.json of {repo_id} is not JSON.") from None
    parameters = marian_parameters(config)  # another architecture: refused, naming what is supported
    if parameters > limits.max_parameters():
        raise PackageError(f"{repo_id} has {parameters / 1e6:,.0f} M parameters; this app loads models of at most "
                           f"{limits.max_parameters() / 1e6:,.0f} M. Choose a smaller model.")
    for name in checkpoint.sizes:
        if name != "config.json":
            fetch(name)
    return parameters


def import_hub_checkpoint(checkpoint: HubCheckpoint, models_dir: Path, name: str | None = None, *,
                    check: Callable[[Path], object], convert: Callable[[Path, Path, str], object], api=None,
                    progress: Callable[[float, str], object] | None = None) -> Path:
    """Fetch the checkpoint beside the packages, convert it (`convert`: import_marian, in a worker process in the app),
    check the package (`check`) and move it in as `name` (reserved by the caller: Library.add)."""
    with staging(models_dir) as tmp:
        fetch_marian(checkpoint, tmp, api, progress)
        if progress:
            progress(1.0, "Converting the checkpoint into a package")
        return install(tmp, models_dir, name, checkpoint.repo_id, check, convert)
