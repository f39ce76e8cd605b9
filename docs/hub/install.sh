#!/usr/bin/env bash
# The users' Python environment, made once as root (docs/jupyterhub.md, step 1):
#   bash install.sh /path/to/checkout      make ENV from PYTHON, install torch's CPU build and the
#                                          course's package, then check it as below
#   bash install.sh --check                only check ENV: that an account with no rights of its
#                                          own (nobody) can run its Python and import torch and
#                                          tfcourse, as every student's server must
# Every user's server runs from ENV, as that user: an environment made from a Python in a private
# home (pyenv under /root, mode 700) gives them "Permission denied" and no server. The default
# PYTHON is the system's, which everyone can run; PYTHON=... picks another, which must be too.
set -euo pipefail

ENV=${TFCOURSE_HUB_ENV:-/opt/tfcourse}
PYTHON=${PYTHON:-/usr/bin/python3}
TORCH_INDEX=${TFCOURSE_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

# Run a command as `nobody` (no home, no group of the course: what a student's server can do at
# least). Through a shell: setpriv's own exec still holds root's right to search every folder.
as_nobody() {
    setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env sh -c '"$@"' sh "$@"
}

check() {
    if ! as_nobody "$ENV/bin/python" -c pass 2>/dev/null; then
        echo "install.sh: other users cannot run $ENV/bin/python (it is $(readlink -f \
"$ENV/bin/python")): a folder on its way is private. Make the environment again from a Python \
every user can run: rm -rf $ENV; PYTHON=/usr/bin/python3 bash install.sh CHECKOUT" >&2
        return 1
    fi
    if ! as_nobody "$ENV/bin/python" -c "import torch, tfcourse" 2>/dev/null; then
        echo "install.sh: other users can run $ENV/bin/python but not import torch and tfcourse:" \
             "install them (bash install.sh CHECKOUT) and make them readable: chmod -R a+rX $ENV" >&2
        return 1
    fi
    echo "install.sh: $ENV is ready for every user ($("$ENV/bin/python" -c \
'import torch; print("torch", torch.__version__)'))"
}

[ "$(id -u)" -eq 0 ] || { echo "install.sh: run it as root (sudo bash install.sh ...)" >&2; exit 1; }
if [ "${1:-}" = "--check" ]; then
    check
    exit
fi
[ $# -ge 1 ] || { echo "usage: bash install.sh /path/to/checkout | --check" >&2; exit 2; }
checkout=$1
umask 022
if ! as_nobody "$PYTHON" -c pass 2>/dev/null; then
    echo "install.sh: other users cannot run $PYTHON ($(readlink -f "$PYTHON")): choose a Python" \
         "every user can run, e.g. PYTHON=/usr/bin/python3 (apt-get install python3-venv)" >&2
    exit 1
fi
"$PYTHON" -m venv "$ENV"
"$ENV/bin/pip" install -q --upgrade pip
# The CPU build of torch: a few hundred MB, where the default Linux build pulls some 5 GB of CUDA
# libraries that a hub without GPUs never uses. Installed first, so that the course's package
# finds torch there and pip does not fetch the default build.
"$ENV/bin/pip" install -q torch --index-url "$TORCH_INDEX"
"$ENV/bin/pip" install -q "$checkout[instructor,hub]"        # not editable (jupyterhub.md says why)
chmod -R a+rX "$ENV"
check
