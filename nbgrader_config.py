"""nbgrader's configuration for this course folder (nbgrader reads it from the working folder).

With it, `nbgrader generate_assignment`, `generate_solution`, `autograde` and the formgrader work on
this folder as an nbgrader course: releases keep the edition's language (course.yaml `language`), and
autograding scores test cells with tfcourse's sandboxed grader instead of running hidden tests in the
student's kernel. `tfcourse build` and `tfcourse grade` use the same steps.
"""
import os

from nbconvert.preprocessors import (
    ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor)
from nbgrader.preprocessors import (
    AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearMarkScheme, ClearOutput,
    ClearSolutions, ComputeChecksums, GetGrades, IgnorePattern, IncludeHeaderFooter,
    InstantiateTests, LimitOutput, LockCells, SaveAutoGrades, SaveCells)

from tfcourse.adapters.nbgrader import (
    ExecuteSolution, SafeCollect, SandboxedGrade, SanitizeMarkdown)
from tfcourse.build.language import SelectLanguage
from tfcourse.course import load_course

HERE = os.path.dirname(os.path.abspath(__file__))
c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.root = HERE
c.CourseDirectory.course_id = load_course(HERE).id
c.CourseDirectory.solution_directory = "solutions"
c.SelectLanguage.course_root = HERE

# nbgrader's own steps, with the language selection first.
c.GenerateAssignment.preprocessors = [
    SelectLanguage, IncludeHeaderFooter, InstantiateTests, LockCells, ClearSolutions, ClearOutput,
    CheckCellMetadata, ComputeChecksums, SaveCells, ClearHiddenTests, ClearMarkScheme,
    ComputeChecksums, CheckCellMetadata]
c.GenerateSolution.preprocessors = [
    SelectLanguage, IncludeHeaderFooter, LockCells, ClearOutput, ClearMarkScheme, ExecuteSolution]
# nbgrader's Execute is replaced by SandboxedGrade: verdicts come from the sandboxed grader, and no
# student cell runs in a kernel (Execute would run them outside the sandbox, as the instructor).
c.Autograde.autograde_preprocessors = [
    SandboxedGrade, SanitizeMarkdown, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
# Collecting keeps a link a student left in the exchange as a link (nbgrader's own copy follows it,
# as you), and SandboxedGrade refuses it.
c.ExchangeFactory.collect = SafeCollect
# nbgrader's feedback shows the autograded notebook, whose test cells hold the hidden tests again
# (autograde restores them from the gradebook): clear them before the page is written.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, SanitizeMarkdown,
                                    CSSHTMLHeaderPreprocessor]
# Pages nbgrader makes from students' notebooks (feedback, formgrader) show no raw HTML or script
# a student wrote (SanitizeMarkdown above, for nbgrader's own templates; this, for nbconvert's).
c.HTMLExporter.sanitize_html = True
# The solutions' training demo takes up to a minute; give cells room.
c.ExecuteSolution.timeout = 600
