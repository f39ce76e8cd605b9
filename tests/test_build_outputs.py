"""Building twice changes nothing: the executed solutions keep what a finished cell shows, not the
progress bar's redraws and timings, nor execution timestamps (tfcourse/build/outputs.py)."""
import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from tfcourse.build.outputs import clean_outputs, settle, untimed

BAR = "training: {pct:3d}%|{bar:10}| {n}/1000 [{elapsed}<{left}, {rate}]"


def _training_cell(seconds_per_step: float):
    """A training cell's outputs as a kernel sends them: a stream per redraw of the bar (each
    starting with a carriage return, timings depending on `seconds_per_step`), then a newline and
    the summary line, then the figure."""
    outputs = []
    for n in range(0, 1001, 50):
        elapsed, left = n * seconds_per_step, (1000 - n) * seconds_per_step
        outputs.append(new_output("stream", name="stdout", text="\r" + BAR.format(
            pct=n // 10, bar="█" * (n // 100), n=n, elapsed=f"{int(elapsed) // 60:02d}:"
            f"{int(elapsed) % 60:02d}", left=f"{int(left) // 60:02d}:{int(left) % 60:02d}",
            rate=f"{1 / seconds_per_step:.2f}step/s")))
    outputs.append(new_output("stream", name="stdout", text="\nloss after 1,000 steps: 0.517 "
                                                           "(floor 0.514) [digits 9, 10]\n"))
    outputs.append(new_output("display_data", data={"text/plain": "<Figure size 700x380>",
                                                    "image/png": "iVBORw0KGgo="}))
    cell = new_code_cell("model, losses = train_sorter(seed=0)", outputs=outputs,
                         execution_count=7, id="demo-train")
    cell.metadata["execution"] = {"iopub.execute_input": "2026-11-29T15:49:48.529790Z",
                                  "shell.execute_reply": "2026-11-29T15:49:51.166590Z"}
    cell.metadata["nbgrader"] = {"grade_id": "demo-train", "locked": True}
    return cell


def _notebook(seconds_per_step):
    return new_notebook(cells=[_training_cell(seconds_per_step),
                               new_code_cell("print('✓ accuracy')", id="trained", outputs=[
                                   new_output("stream", name="stdout", text="✓ accuracy (6/6)\n")])])


def test_a_progress_bar_leaves_one_line_without_timings():
    nb = clean_outputs(_notebook(0.025))
    outputs = nb.cells[0].outputs
    assert [output.output_type for output in outputs] == ["stream", "display_data"]
    assert outputs[0].text == ("training: 100%|██████████| 1000/1000\n"
                               "loss after 1,000 steps: 0.517 (floor 0.514) [digits 9, 10]\n")
    assert outputs[1].data["image/png"] == "iVBORw0KGgo="
    assert "execution" not in nb.cells[0].metadata
    assert nb.cells[0].metadata["nbgrader"]["grade_id"] == "demo-train"
    assert nb.cells[0].execution_count == 7
    assert nb.cells[1].outputs[0].text == "✓ accuracy (6/6)\n"


def test_two_runs_at_different_speeds_save_the_same_notebook():
    fast, slow = clean_outputs(_notebook(0.025)), clean_outputs(_notebook(0.65))
    assert nbformat.writes(fast) == nbformat.writes(slow)
    assert nbformat.writes(clean_outputs(fast)) == nbformat.writes(fast)        # idempotent


def test_settle_and_untimed():
    assert settle("a\rb\rc\nnext\r\n") == "c\nnext\n"
    assert untimed("training:  50%|█████     | 500/1000 [00:36<00:57,  8.66it/s]") == \
        "training:  50%|█████     | 500/1000"
    assert untimed("grading: 3/4 [1:02:03, 2.08s/it]") == "grading: 3/4"
    assert untimed("training:   0%|          | 0/1000 [00:00<?, ?it/s]") == \
        "training:   0%|          | 0/1000"
    for kept in ("shapes [2, 3, 5, 6]", "at 12:30 [done]", "mask [00:36]x"):
        assert untimed(kept) == kept


def test_the_solution_step_cleans_what_the_kernel_printed(monkeypatch):
    """ExecuteSolution (nbgrader's generate_solution step) runs the notebook, then cleans it."""
    from nbgrader.preprocessors import Execute

    from tfcourse.adapters.nbgrader import ExecuteSolution

    monkeypatch.setattr(Execute, "preprocess", lambda self, nb, resources: (_notebook(0.3),
                                                                             resources))
    nb, resources = ExecuteSolution()._execute(new_notebook(), {"x": 1})
    assert resources == {"x": 1}
    assert nb.cells[0].outputs[0].text.startswith("training: 100%|██████████| 1000/1000\n")
    assert "execution" not in nb.cells[0].metadata
