#!/usr/bin/env bash
# The hub's shared pieces, made once as root (docs/jupyterhub.md, step 3):
#   - nbgrader's exchange: a folder every user may write to;
#   - the Jupyter configuration every user's server reads: where the exchange is, and a Course
#     menu in JupyterLab that opens the feedback service's page;
#   - the students' own Jupyter configuration: nbgrader's instructor tools and JupyterLab's news
#     turned off and locked;
#   - given a course checkout (bash setup.sh /path/to/checkout): the instructor's course folder,
#     a copy of the course in the instructor's home that only they can read, and the line of their
#     ~/.jupyter/nbgrader_config.py that points the formgrader at it.
# The places are jupyterhub_config.py's, from the same environment variables with the same
# defaults. Running it again changes nothing it made before, and never overwrites a course folder.
set -euo pipefail

EXCHANGE=${TFCOURSE_HUB_EXCHANGE:-/srv/nbgrader/exchange}
JUPYTER_ETC=${TFCOURSE_HUB_JUPYTER_ETC:-/etc/jupyter}
STUDENT_ETC=${TFCOURSE_HUB_STUDENT_ETC:-/etc/jupyter-students}
INSTRUCTOR=${TFCOURSE_HUB_INSTRUCTOR:-instructor}

[ "$(id -u)" -eq 0 ] || { echo "setup.sh: run it as root (sudo bash setup.sh)" >&2; exit 1; }
umask 022

# The exchange: every user writes into it (nbgrader's release stops when its root is not rwx for
# all); the sticky bit (1): nobody can rename or replace a folder that is not theirs. nbgrader makes
# the course's folders in it itself: inbound/, where students may write but not list (none sees
# another's submission), outbound/ and feedback/, which they may read.
mkdir -p "$EXCHANGE"
chmod 1777 "$EXCHANGE"

# Where the exchange is, for every user's nbgrader: commands, formgrader and Assignments tab.
mkdir -p "$JUPYTER_ETC"
printf 'c = get_config()\nc.Exchange.root = "%s"\n' "$EXCHANGE" >"$JUPYTER_ETC/nbgrader_config.py"
chmod 644 "$JUPYTER_ETC/nbgrader_config.py"

# Everyone's JupyterLab: a Course menu whose item opens the feedback service's page (the hub lists
# it only in its own Services menu, which a student in JupyterLab does not see). Settings given
# here are defaults: a user may change them, not the page they open.
FEEDBACK_PATH=${TFCOURSE_HUB_FEEDBACK_PATH:-/services/tfcourse-feedback/}
mkdir -p "$JUPYTER_ETC/labconfig"
cat >"$JUPYTER_ETC/labconfig/default_setting_overrides.json" <<EOF
{
  "@jupyterlab/mainmenu-extension:plugin": {
    "menus": [
      {
        "id": "jp-mainmenu-tfcourse",
        "label": "Course",
        "rank": 1000,
        "items": [
          {
            "command": "help:open",
            "args": {"url": "$FEEDBACK_PATH", "text": "My feedback", "newBrowserTab": true}
          }
        ]
      }
    ]
  }
}
EOF
chmod -R a+rX "$JUPYTER_ETC"

# The students' servers: nbgrader's Formgrader, Create Assignment and Course List, and JupyterLab's
# news, disabled and locked (JupyterLab >= 4.1 does not let a user turn a locked plugin back on);
# the formgrader's and course list's server extensions off (/formgrader answers 404). The same
# settings the instructor guide gives for a students' image ("What students see"), in a folder of
# their own that jupyterhub_config.py puts first in the students' JUPYTER_CONFIG_PATH only.
mkdir -p "$STUDENT_ETC/labconfig"
cat >"$STUDENT_ETC/labconfig/page_config.json" <<'EOF'
{
  "disabledExtensions": {
    "@jupyter/nbgrader:formgrader": true,
    "@jupyter/nbgrader:create-assignment": true,
    "@jupyter/nbgrader:course-list": true,
    "@jupyterlab/apputils-extension:announcements": true
  },
  "lockedExtensions": {
    "@jupyter/nbgrader:formgrader": true,
    "@jupyter/nbgrader:create-assignment": true,
    "@jupyter/nbgrader:course-list": true,
    "@jupyterlab/apputils-extension:announcements": true
  }
}
EOF
cat >"$STUDENT_ETC/jupyter_server_config.json" <<'EOF'
{
  "ServerApp": {
    "jpserver_extensions": {
      "nbgrader.server_extensions.formgrader": false,
      "nbgrader.server_extensions.course_list": false
    }
  }
}
EOF
chmod -R a+rX "$STUDENT_ETC"

# The instructor's course folder, from a checkout of the course: what grading needs (the hidden
# graders in autograder/, the solutions), readable by the instructor alone.
if [ $# -ge 1 ]; then
    checkout=$1
    home=$(getent passwd "$INSTRUCTOR" | cut -d: -f6)
    [ -n "$home" ] || { echo "setup.sh: no account $INSTRUCTOR (make it first)" >&2; exit 1; }
    course=${TFCOURSE_HUB_COURSE:-$home/course}
    group=$(id -gn "$INSTRUCTOR")
    chmod 700 "$home"
    if [ -e "$course" ]; then
        echo "setup.sh: $course exists; left as it is"
    else
        mkdir -m 700 "$course"
        for part in course.yaml nbgrader_config.py source release autograder solutions; do
            cp -r "$checkout/$part" "$course/"
        done
        chown -R "$INSTRUCTOR:$group" "$course"
    fi
    # The formgrader runs in the instructor's server, which starts in their home folder: this
    # line has it read the course's nbgrader_config.py (the instructor guide, "The formgrader").
    mkdir -p "$home/.jupyter"
    printf 'c = get_config()\nload_subconfig("%s/nbgrader_config.py")\n' "$course" \
        >"$home/.jupyter/nbgrader_config.py"
    chown -R "$INSTRUCTOR:$group" "$home/.jupyter"
fi
echo "setup.sh: exchange $EXCHANGE, $JUPYTER_ETC/nbgrader_config.py, students' $STUDENT_ETC"
