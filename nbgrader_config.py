"""nbgrader's configuration for this course folder (nbgrader reads it from the working folder; a
formgrader whose server starts elsewhere reads it through `load_subconfig`, see the guide).

With it, `nbgrader generate_assignment`, `generate_solution`, `autograde` and the formgrader work on
this folder as an nbgrader course: releases keep the edition's language (course.yaml `language`), and
autograding scores test cells with tfcourse's sandboxed grader instead of running hidden tests in the
student's kernel. `tfcourse build` and `tfcourse grade` use the same steps.

The exchange's place (`c.Exchange.root`) is not set here: students' servers read it too, and they
have no course folder. Set it where every user's Jupyter reads it (docs/instructor-guide.md,
"The exchange"); a command line's `--Exchange.root` reaches that command only, not the formgrader.

Should this file fail to load (a mistake in course.yaml, a tfcourse that does not match), nbgrader
would log the error and go on with its own defaults, whose autograde runs every student cell in a
kernel, as you, outside the sandbox. So a failure here configures nbgrader to do nothing instead:
each command that reads or writes notebooks (and collect) stops with the error.
"""
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
c = get_config()  # noqa: F821 (nbgrader provides it)


def configure(c):
    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import (
        AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearMarkScheme, ClearOutput,
        ClearSolutions, ComputeChecksums, DeduplicateIds, GetGrades, IgnorePattern,
        IncludeHeaderFooter, InstantiateTests, LimitOutput, LockCells, OverwriteKernelspec,
        SaveAutoGrades, SaveCells)
    from sqlalchemy.exc import SAWarning

    from tfcourse.adapters.nbgrader import (
        ClearHiddenTestsOnPage, ExecuteSolution, GuardedNotebookExporter, OverwriteReleasedCells,
        SafeCollect, SandboxedGrade, SanitizeMarkdown)
    from tfcourse.build.language import SelectLanguage
    from tfcourse.course import load_course

    c.CourseDirectory.root = HERE
    c.CourseDirectory.course_id = load_course(HERE).id
    c.CourseDirectory.solution_directory = "solutions"
    c.SelectLanguage.course_root = HERE
    # the course these steps grade with: this folder, wherever the server or command started
    c.SandboxedGrade.course_root = HERE
    c.ExecuteSolution.course_root = HERE

    # nbgrader's own steps, with the language selection first.
    c.GenerateAssignment.preprocessors = [
        SelectLanguage, IncludeHeaderFooter, InstantiateTests, LockCells, ClearSolutions,
        ClearOutput, CheckCellMetadata, ComputeChecksums, SaveCells, ClearHiddenTests,
        ClearMarkScheme, ComputeChecksums, CheckCellMetadata]
    c.GenerateSolution.preprocessors = [
        SelectLanguage, IncludeHeaderFooter, LockCells, ClearOutput, ClearMarkScheme,
        ExecuteSolution]
    # Before grading, nbgrader puts each locked cell back as the gradebook holds it; this step
    # does the same without warning that every test cell's checksum changed (students got them
    # without their hidden tests): it warns when a student changed a locked cell.
    c.Autograde.sanitize_preprocessors = [
        ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteReleasedCells,
        CheckCellMetadata]
    # nbgrader's Execute is replaced by SandboxedGrade: verdicts come from the sandboxed grader,
    # and no student cell runs in a kernel (Execute would run them outside the sandbox, as the
    # instructor).
    # nbgrader reads each submitted notebook only after the checks the grader makes before it
    # parses one (a notebook built to be expensive to read is refused, with the reason).
    c.Autograde.exporter_class = GuardedNotebookExporter
    c.GuardedNotebookExporter.course_root = HERE
    c.Autograde.autograde_preprocessors = [
        SandboxedGrade, SanitizeMarkdown, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
        SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
    # Collecting keeps a link a student left in the exchange as a link (nbgrader's own copy
    # follows it, as you), and SandboxedGrade refuses it.
    c.ExchangeFactory.collect = SafeCollect
    # nbgrader's feedback shows the autograded notebook, whose test cells hold the hidden tests
    # again (autograde restores them from the gradebook): clear them before the page is written.
    c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTestsOnPage, SanitizeMarkdown,
                                        CSSHTMLHeaderPreprocessor]
    # Pages nbgrader makes from students' notebooks (feedback, formgrader) show no raw HTML or
    # script a student wrote (SanitizeMarkdown above, for nbgrader's own templates; this, for
    # nbconvert's).
    c.HTMLExporter.sanitize_html = True
    # The solutions' training demo takes up to a minute; give cells room.
    c.ExecuteSolution.timeout = 600

    # nbgrader 0.9's gradebook on SQLAlchemy 2 prints three SAWarnings for each submission
    # autograde records ("Object of type <SubmittedAssignment> not in session, add operation
    # along 'Assignment.submissions' will not proceed"), whatever the course: nbgrader builds a
    # submission's rows before it adds the submission to the session, which SQLAlchemy 2 no
    # longer does by itself, and adds it right after, rows and all. Nothing is lost; only that
    # message is silenced.
    warnings.filterwarnings(
        "ignore", category=SAWarning, module=r"nbgrader\.api",
        message=r"Object of type <Submitted\w+> not in session, add operation along "
                r"'\w+\.submissions' will not proceed")


def refuse(c, error):
    """nbgrader configured to stop, naming `error`, wherever its defaults would act."""
    from nbgrader.exchange.default.collect import ExchangeCollect
    from nbgrader.preprocessors import NbGraderPreprocessor

    message = (f"{os.path.join(HERE, 'nbgrader_config.py')} did not load: {type(error).__name__}: "
               f"{str(error).rstrip('.')}. Nothing is done until it loads (nbgrader's defaults "
               f"would run students' cells outside the sandbox).")
    print(message, file=sys.stderr)

    class ConfigurationFailed(NbGraderPreprocessor):
        def preprocess(self, nb, resources):
            raise RuntimeError(message)

    class CollectRefused(ExchangeCollect):
        def start(self):
            raise RuntimeError(message)

    c.GenerateAssignment.preprocessors = [ConfigurationFailed]
    c.GenerateSolution.preprocessors = [ConfigurationFailed]
    c.Autograde.sanitize_preprocessors = [ConfigurationFailed]
    c.Autograde.autograde_preprocessors = [ConfigurationFailed]
    c.GenerateFeedback.preprocessors = [ConfigurationFailed]
    c.Execute.enabled = False               # and no kernel, whatever asks for one
    c.ExchangeFactory.collect = CollectRefused


try:
    configure(c)
except Exception as error:  # noqa: BLE001 (whatever it is, nbgrader must not go on with defaults)
    refuse(c, error)
