"""Submission keys: whose a submission is, where the file system cannot say (`--trust-names`).

Where every student's server writes as one account (containers), a folder's owner names nobody and
its name is the writer's to choose: three folders named for a classmate would spend that
classmate's fair use and fill their page. So under --trust-names a submission is a student's only
when its folder holds `feedback-key.txt` with that student's key: HMAC-SHA256 of the student's name
under a secret of the service's (kept in its state folder, readable by the instructor's account
alone). The service's page shows each logged-in hub user their own key (the hub's login says who
they are), and `api/key` gives it to their server. A folder without the right key is recorded as
nobody's: it is not graded, spends no one's fair use and shows on no student's page (the
instructor's page lists it).

What a key is worth: that of the students who keep it to themselves. It lives in the student's
home, the folders they submit (nbgrader's inbound folder cannot be listed, and its names hold a
random part) and their own page. Deleting the secret gives everyone a new key.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from tfcourse.submission.files import Refused, read_inside

KEY_FILE = "feedback-key.txt"       # in the assignment folder the student submits
SECRET_FILE = "submission-secret"    # in the service's state folder
NOBODY = "(unconfirmed)"             # whose a folder without its student's key is: no hub user's
KEY_BYTES = 200                      # a key file is one line; more is not one


def secret(state: Path) -> bytes:
    """The service's secret (made once, 0600, in `state`, which private_folder made 0700)."""
    path = Path(state) / SECRET_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    data = bytes(read_inside(Path(state), (SECRET_FILE,), 0.001, owner=os.geteuid())).strip()
    if len(data) < 32:
        raise OSError(f"{path} is not a secret of this service's (too short)")
    return data


def key_of(secret_bytes: bytes, student: str) -> str:
    """The key of `student` (hub user name) under the service's secret."""
    digest = hmac.new(secret_bytes, b"tfcourse submission key\0" + student.encode("utf-8"),
                      hashlib.sha256).hexdigest()
    return digest[:32]


def key_in(folder: Path) -> str | None:
    """The key a submitted folder holds (its KEY_FILE's first line), None when it has none that
    can be read: a link, a file of several names, too large, not text."""
    try:
        data = read_inside(Path(folder), (KEY_FILE,), KEY_BYTES / 1048576)
        return bytes(data).decode("ascii").strip()
    except (OSError, Refused, UnicodeDecodeError):
        return None


def holds_key(secret_bytes: bytes, folder: Path, student: str) -> bool:
    """Whether `folder` holds `student`'s key."""
    found = key_in(folder)
    return found is not None and hmac.compare_digest(found, key_of(secret_bytes, student))
