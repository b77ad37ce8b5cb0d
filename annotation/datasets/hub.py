"""Publishing a built snapshot as a Hugging Face dataset repository (issue 29, part 3).

The snapshot's folder is already a Hub dataset: its README.md declares the licences, the configs
and their features (manifest.py). Pushing copies every file the snapshot lists out of its storage
(local disk or S3), checks each against the sha256 the build recorded, and commits them in one
commit through `huggingface_hub`. Pushing again is harmless: the repository is created only when
missing, and the client leaves out every file the Hub already holds as it is, so the same
snapshot pushed twice makes one commit.
"""

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from annotation.datasets.snapshots import downloadable_names, open_snapshot_file
from annotation.exceptions import AnnotationError
from annotation.models import Snapshot

_REPO_ID_HELP = "a Hub repository id such as your-name/visit-bench (owner/name)"


@dataclass(frozen=True)
class Pushed:
    repo_url: str
    commit_url: str
    files: tuple[str, ...]


def _check_repo_id(repo_id):
    owner, _, name = repo_id.partition("/")
    if not owner or not name or "/" in name or any(c.isspace() for c in repo_id):
        raise AnnotationError(f"“{repo_id}” is not {_REPO_ID_HELP}.")


def _copy_files(snapshot, folder):
    """The snapshot's files copied into `folder`, each checked against the build's sha256."""
    recorded = {entry["name"]: entry["sha256"] for entry in snapshot.files if "sha256" in entry}
    names = downloadable_names(snapshot)
    for name in names:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with open_snapshot_file(snapshot=snapshot, name=name) as source, open(target, "wb") as copy:
            for block in iter(lambda source=source: source.read(1 << 20), b""):
                digest.update(block)
                copy.write(block)
        if name in recorded and digest.hexdigest() != recorded[name]:
            raise AnnotationError(f"{snapshot}: the stored {name} is not the file the build wrote "
                                  "(its sha256 differs); nothing was pushed.")
    return tuple(names)


def push_snapshot(*, snapshot, repo_id, token, endpoint=None, private=None):
    """Create the dataset repository if needed and commit the snapshot's files to it.

    `endpoint` defaults to the HUGGINGFACE_ENDPOINT setting, `private` (for a repository this
    creates) to HUGGINGFACE_PRIVATE.
    """
    if snapshot.status != Snapshot.Status.DONE:
        raise AnnotationError(f"{snapshot} is not built ({snapshot.get_status_display()}); push a done snapshot.")
    if not token:
        raise AnnotationError("No Hugging Face token: set HUGGINGFACE_TOKEN to a token with write access.")
    if not repo_id:
        raise AnnotationError(f"No repository: give {_REPO_ID_HELP}, or set HUGGINGFACE_DATASET_REPO.")
    _check_repo_id(repo_id)
    # Loaded by the command that pushes, never by a web worker.
    import httpx2
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(endpoint=endpoint or settings.HUGGINGFACE_ENDPOINT, token=token)
    private = settings.HUGGINGFACE_PRIVATE if private is None else private
    with tempfile.TemporaryDirectory(prefix="hub-push-") as workdir:
        files = _copy_files(snapshot, Path(workdir))
        try:
            repo_url = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
            commit = api.upload_folder(
                repo_id=repo_id, repo_type="dataset", folder_path=workdir,
                commit_message=f"crowdbench snapshot v{snapshot.version}",
                commit_description=f"Content hash (sha256 of SHA256SUMS): {snapshot.content_sha256}",
            )
        except HfHubHTTPError as error:
            raise AnnotationError(f"The Hub refused the push of {snapshot} to {repo_id} "
                                  f"({error.response.status_code}): {error.server_message or error}") from None
        except ConnectionError as error:
            # hf_xet's uploads to the Hub's Xet storage fail this way.
            raise AnnotationError(f"The Hub's storage did not take the files of {snapshot} ({error}); the "
                                  "commit was not made.") from None
        except httpx2.HTTPError as error:
            # huggingface_hub's own transport; it has retried already.
            raise AnnotationError(f"The Hub at {api.endpoint} could not be reached ({error}); nothing was "
                                  "pushed.") from None
    return Pushed(repo_url=str(repo_url), commit_url=commit.commit_url, files=files)
