"""Serving a built snapshot's files to the people allowed to read them, from the admin and the API.

Every download passes through a view that checks the reader (a staff account holding
"annotation.view_snapshot"), whatever the storage: the files stream from local disk or from S3
through django-storages, so no address that works without a login ever leaves the site, and the
storage needs no public URL (the snapshots folder is not under MEDIA_ROOT, the bucket's
"snapshots/" prefix need not be public).
"""

from pathlib import PurePosixPath

from django.http import FileResponse, Http404

from annotation.datasets import snapshots
from annotation.exceptions import AnnotationError
from annotation.models import ResearchGroup

PERMISSION = "annotation.view_snapshot"
CONTENT_TYPES = {
    ".csv": "text/csv; charset=utf-8",
    ".jsonl": "application/jsonl; charset=utf-8",
    ".json": "application/json",
    ".parquet": "application/vnd.apache.parquet",
    ".md": "text/markdown; charset=utf-8",
}


def may_download(user):
    return bool(user and user.is_active and user.is_staff and user.has_perm(PERMISSION))


def withheld(snapshot, user):
    """Why `user` may not download `snapshot`'s files although they see it, or None.

    Before a snapshot of no group was kept to the rows of no group, one made outside groups (by a
    superuser, typically) held every group's benchmark. Such a snapshot, built while any group
    existed, is a superuser's to download; staff outside groups, who see snapshots of no group,
    are told to make a new one. Its manifest says which it is: one built under the rule names its
    `research_group` (null for none)."""
    if (snapshot.group_id is not None or "research_group" in snapshot.manifest
            or (user is not None and user.is_superuser)):
        return None
    built = snapshot.finished_at or snapshot.created_at
    if not ResearchGroup.objects.filter(created_at__lte=built).exists():
        return None
    return (f"{snapshot} was built before a snapshot of no research group was kept to the rows no group owns, "
            "so it may hold every group's data: only a superuser may download it. Make a new snapshot to "
            "download the rows of no group.")


def download_name(snapshot, name):
    """The file name the browser saves: the version in front, folders flattened
    ("spreadsheet/x.csv" and "x.csv" would otherwise both save as x.csv)."""
    return f"crowdbench-v{snapshot.version}-{name.replace('/', '-')}"


def file_response(*, snapshot, name):
    try:
        handle = snapshots.open_snapshot_file(snapshot=snapshot, name=name)
    except AnnotationError as error:
        raise Http404(str(error)) from None
    suffix = PurePosixPath(name).suffix
    response = FileResponse(handle, as_attachment=True, filename=download_name(snapshot, name),
                            content_type=CONTENT_TYPES.get(suffix, "text/plain; charset=utf-8"))
    response["Cache-Control"] = "private, no-store"
    return response
