"""What an instructor learns from a graded class: `tfcourse report` (classreport.py), a page per
assignment with the scores, each check's pass rate, the messages students got most (by kind, see
i18n.message_kind), which checks fail together, and what grading cost."""
