"""JupyterHub for the course: local Unix accounts, nbgrader's exchange, the feedback service.

The recipe is docs/jupyterhub.md; this file is read by `jupyterhub -f jupyterhub_config.py`, run
as root. Every place it names can be changed with an environment variable of the hub (the project's
test does that to run a hub in a folder of its own); the defaults are the recipe's:

    TFCOURSE_HUB_URL            where the hub listens                    http://:8000
    TFCOURSE_HUB_ENV            the Python environment users' servers run from    /opt/tfcourse
    TFCOURSE_HUB_EXCHANGE       nbgrader's exchange                      /srv/nbgrader/exchange
    TFCOURSE_HUB_JUPYTER_ETC    the Jupyter configuration every user reads        /etc/jupyter
    TFCOURSE_HUB_STUDENT_ETC    the students' own (no instructor tools)  /etc/jupyter-students
    TFCOURSE_HUB_INSTRUCTOR     the instructor's account                 instructor
    TFCOURSE_HUB_STUDENT_GROUP  the Unix group of the students' accounts students
    TFCOURSE_HUB_COURSE         the course folder                        ~instructor/course
    TFCOURSE_HUB_FEEDBACK_STATE the feedback service's own folder        COURSE/feedback-service
    TFCOURSE_HUB_FEEDBACK_URL   where that service listens               http://127.0.0.1:901
"""
import os
import pwd

c = get_config()  # noqa: F821 (JupyterHub provides it)

setting = os.environ.get
ENV = setting("TFCOURSE_HUB_ENV", "/opt/tfcourse")
EXCHANGE = setting("TFCOURSE_HUB_EXCHANGE", "/srv/nbgrader/exchange")
JUPYTER_ETC = setting("TFCOURSE_HUB_JUPYTER_ETC", "/etc/jupyter")
STUDENT_ETC = setting("TFCOURSE_HUB_STUDENT_ETC", "/etc/jupyter-students")
INSTRUCTOR = setting("TFCOURSE_HUB_INSTRUCTOR", "instructor")
STUDENT_GROUP = setting("TFCOURSE_HUB_STUDENT_GROUP", "students")
try:
    INSTRUCTOR_HOME = pwd.getpwnam(INSTRUCTOR).pw_dir
except KeyError:
    INSTRUCTOR_HOME = f"/home/{INSTRUCTOR}"     # the account is made later (the recipe's step 2)
COURSE = setting("TFCOURSE_HUB_COURSE", os.path.join(INSTRUCTOR_HOME, "course"))
FEEDBACK_STATE = setting("TFCOURSE_HUB_FEEDBACK_STATE", os.path.join(COURSE, "feedback-service"))
FEEDBACK_URL = setting("TFCOURSE_HUB_FEEDBACK_URL", "http://127.0.0.1:901")
FEEDBACK = "tfcourse-feedback"                  # the service's name: /services/tfcourse-feedback/
PATH = os.pathsep.join([os.path.join(ENV, "bin"), "/usr/local/bin", "/usr/bin", "/bin"])

c.JupyterHub.bind_url = setting("TFCOURSE_HUB_URL", "http://:8000")

# Who logs in: the machine's own accounts and passwords (PAM), the instructor and the members of
# the students' group.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = {INSTRUCTOR}
c.Authenticator.allowed_groups = {STUDENT_GROUP}

# Each user's server runs as that user (their files, their permissions), from the course's Python
# environment, and opens JupyterLab in their home folder.
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [os.path.join(ENV, "bin", "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.environment = {"PATH": PATH}
# A link to a user's server that is not running (a bookmark of /user/instructor/formgrader, the
# address bar after a restart) starts it and goes on there, rather than stopping at the hub's
# "Server not running" page with its button.
c.JupyterHub.implicit_spawn_seconds = 1
c.Spawner.start_timeout = 120           # a server that imports torch on a busy machine: not 60 s
c.Spawner.http_timeout = 120


def per_role_configuration(spawner):
    """Everyone's Jupyter reads JUPYTER_ETC (the exchange's place); everyone but the instructor
    also reads STUDENT_ETC first, which turns off nbgrader's instructor tools."""
    folders = [JUPYTER_ETC] if spawner.user.name == INSTRUCTOR else [STUDENT_ETC, JUPYTER_ETC]
    spawner.environment = {**spawner.environment,
                           "JUPYTER_CONFIG_PATH": os.pathsep.join(folders)}


c.Spawner.pre_spawn_hook = per_role_configuration

# Feedback on submit: a service the hub starts as the instructor's account, which grades each new
# submission in the exchange at once (in the sandbox) and shows each student their own results
# at /services/tfcourse-feedback/ (they log in with the hub's login).
# Its port is below 1024 (net.ipv4.ip_unprivileged_port_start), which no student's process may
# bind: one that held it while the service restarts would receive every student's requests, with
# their hub cookies. The hub (root) starts it through setpriv, which becomes the instructor's
# account keeping only the right to bind such a port (the service passes it to none of the
# programs it starts).
try:
    INSTRUCTOR_GROUP = str(pwd.getpwnam(INSTRUCTOR).pw_gid)
except KeyError:
    INSTRUCTOR_GROUP = INSTRUCTOR                   # the account is made later (step 2)
AS_INSTRUCTOR = ["setpriv", f"--reuid={INSTRUCTOR}", f"--regid={INSTRUCTOR_GROUP}",
                 "--init-groups", "--inh-caps=-all,+net_bind_service",
                 "--ambient-caps=+net_bind_service", "--",
                 "env", f"HOME={INSTRUCTOR_HOME}", f"USER={INSTRUCTOR}", f"LOGNAME={INSTRUCTOR}"]
c.JupyterHub.services = [{
    "name": FEEDBACK,
    "url": FEEDBACK_URL,
    "cwd": COURSE,
    "command": AS_INSTRUCTOR + [
                os.path.join(ENV, "bin", "tfcourse"), "feedback-service", "--course", COURSE,
                "--exchange", EXCHANGE, "--state", FEEDBACK_STATE, "--jobs", "1",
                "--instructor", INSTRUCTOR],
    "environment": {"PATH": PATH, "JUPYTER_CONFIG_PATH": JUPYTER_ETC},
    "oauth_no_confirm": True,           # no "authorize this service?" page for students
    "display": True,                    # listed in the hub's Services menu
}]
# Every user may open the service's page (it shows each one their own submissions only).
c.JupyterHub.load_roles = [
    {"name": "user", "scopes": ["self", f"access:services!service={FEEDBACK}"]},
]
