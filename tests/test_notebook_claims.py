"""What the notebooks' prose says about their figures and printed results is true of the solved
notebooks (solutions/, executed by `tfcourse build`), and the figures it quotes from a benchmark
are the benchmark's (bench/README.md). Each test reads what a cell printed and checks the claim the
prose next to it makes, so that a change of data, seed or recipe that makes the prose false fails
here."""
import json
import math
import re

import pytest
import torch

from tfcourse import notebook

from conftest import NOTEBOOK_OF, ROOT

BENCH = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
NUMBER = r"(\d+(?:\.\d+)?)"


def printed(assignment: str, grade_id: str) -> str:
    """What the solved notebook's cell `grade_id` printed."""
    nb = json.loads((ROOT / "solutions" / assignment / NOTEBOOK_OF[assignment]).read_text("utf-8"))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            text = "".join("".join(output.get("text", "")) for output in cell.get("outputs", [])
                           if output.get("output_type") == "stream")
            assert text, f"{assignment}: cell {grade_id} printed nothing"
            return text
    raise AssertionError(f"{assignment}: no cell {grade_id}")


def prose(assignment: str, lang: str) -> str:
    """The notebook's prose in `lang`, every run of spaces and line breaks one space."""
    nb = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    return " ".join(" ".join(notebook.text(cell) for cell in nb.cells
                             if notebook.lang(cell) == lang).split())


def figures(pattern: str, text: str) -> list[tuple[float, ...]]:
    return [tuple(float(g) for g in match.groups()) for match in re.finditer(pattern, text)]


def ablation(change: str, seed: int) -> dict[str, float]:
    """A row of bench/README.md's table of bench/ablations.py: loss, greedy, forced, digits."""
    row = re.search(rf"^\| {re.escape(change)} \| {seed} \| {NUMBER} \| {NUMBER}% \| {NUMBER}% "
                    rf"\| {NUMBER}% \|", BENCH, re.M)
    assert row, f"bench/README.md has no ablation row {change} {seed}"
    return dict(zip(("loss", "greedy", "forced", "digits"), map(float, row.groups())))


def python_block(assignment: str, lang: str, after: str) -> str:
    """The first ```python block of the prose in `lang` that follows the words `after`."""
    text = "\n".join(notebook.text(cell) for cell in notebook.read(
        ROOT / "source" / assignment / NOTEBOOK_OF[assignment]).cells if notebook.lang(cell) == lang)
    return re.search(r"```python\n(.*?)```", text[text.index(after):], re.S).group(1)


def solved(assignment: str) -> dict:
    """The namespace of the course's solution of `assignment`, with its recipe cells run."""
    from tfcourse.course import load_course
    from tfcourse.submission.reference import assignment_source, recipe_source, reference

    course = load_course(ROOT)
    reference(course, assignment)                       # installs the modules it imports
    namespace = {"__name__": f"solved_{assignment.replace('-', '_')}"}
    exec(compile(assignment_source(course, assignment).solution_code, "<solution>", "exec"),
         namespace)
    exec(compile(recipe_source(course, assignment), "<recipe>", "exec"), namespace)
    return namespace


def spanish(figure: str) -> str:
    return figure.replace(".", ",").replace("%", " %")


# -- 01 --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "es"])
def test_the_closing_question_names_the_demo_that_has_keys(lang):
    """"Reverse the keys ... in the demo X (`keys.flip(0)`)" names a demo of this notebook by its
    heading, and that demo's code has `keys` (it said "the first demo", the sqrt(d_k) experiment,
    which has none)."""
    nb = notebook.read(ROOT / "source" / "01-attention" / NOTEBOOK_OF["01-attention"])
    named = re.search(r"(?:in the demo|en la demo) \*([^*]+)\*", prose("01-attention", lang))
    assert named, f"{lang}: the closing question names no demo by its heading"
    start = next(index for index, cell in enumerate(nb.cells) if notebook.lang(cell) == lang
                 and f"### {named.group(1)}\n" in notebook.text(cell) + "\n")
    code = next(cell for cell in nb.cells[start:] if cell.cell_type == "code")
    assert "keys =" in notebook.text(code), notebook.text(code)


def test_each_query_finds_its_partners_key_with_a_share_from_under_half_to_almost_all():
    rows = re.findall(r"(\w+)→(\w+) " + NUMBER, printed("01-attention", "demo-sdpa"))
    partners = {"I": "saw", "saw": "I", "a": "cat", "cat": "a", "sat": "down", "down": "sat"}
    assert {query: key for query, key, _ in rows} == partners
    shares = [float(share) for _, _, share in rows]
    assert min(shares) < 0.5 and max(shares) > 0.95, shares
    assert "one bright cell" not in prose("01-attention", "en")
    assert "next part of the course" not in prose("01-attention", "en")


def test_the_variance_of_q_dot_k_is_d_k_and_only_the_unscaled_softmax_sharpens():
    rows = figures(r"d_k = +(\d+): variance of q·k +" + NUMBER + r" +largest weight: unscaled "
                   + NUMBER + ", scaled " + NUMBER, printed("01-attention", "demo-scale"))
    assert [row[0] for row in rows] == [8, 64, 512]
    for d_k, variance, _, _ in rows:
        assert abs(variance / d_k - 1) < 0.15, (d_k, variance)
    unscaled = [row[2] for row in rows]
    scaled = [row[3] for row in rows]
    assert unscaled == sorted(unscaled) and unscaled[-1] > 0.9 and unscaled[0] > scaled[0]
    assert max(scaled) - min(scaled) < 0.05


def test_a_saturated_softmax_passes_almost_no_gradient_to_any_score_the_winners_included():
    numbers = torch.Generator().manual_seed(0)
    q = torch.randn(1000, 1, 512, generator=numbers)
    k = torch.randn(1000, 10, 512, generator=numbers)
    scores = (q @ k.transpose(-2, -1)).squeeze(1)
    sizes = []
    for scaled in (scores, scores / math.sqrt(512)):
        p = scaled.softmax(dim=-1)
        jacobian = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]   # d weights / d scores
        sizes.append(jacobian.flatten(1).norm(dim=1).median().item())
    unscaled, scaled = sizes
    assert unscaled < 0.01 * scaled, sizes
    assert "the others get almost no gradient" not in prose("01-attention", "en")
    assert "the winner's included, hardly moves the weights" in prose("01-attention", "en")
    assert "también el de la ganadora, casi no mueve los pesos" in prose("01-attention", "es")


def test_the_causal_mask_is_needed_in_training_and_its_figures_are_the_benchmarks():
    """Without the mask, teacher forcing hands each position its answer: the sorter looks trained
    (loss and teacher-forced accuracy) and sorts nothing greedily (bench/ablations.py, seed 0)."""
    row = ablation("no-mask", 0)
    assert row["greedy"] == 0.0 and row["forced"] > 95 and row["loss"] < 0.55
    figures_en = (f"{row['loss']:.3f}", f"{row['forced']:.1f}%", f"{row['greedy']:.1f}%")
    for lang in ("en", "es"):
        for figure in figures_en:
            assert (figure if lang == "en" else spanish(figure)) in prose("01-attention", lang)
    assert "The decoder needs it because, while generating" not in prose("01-attention", "en")
    assert "The decoder needs it in *training*" in prose("01-attention", "en")
    assert "El decoder la necesita *al entrenar*" in prose("01-attention", "es")


def test_left_padding_blocks_the_pads_rows_and_their_nan_reaches_every_token_a_layer_later():
    """The answer's own code, run with the course's attention: after one layer the rows of
    queries 0-2 (the pads) are NaN, after two every row is."""
    parts = solved("01-attention")
    torch.manual_seed(0)
    namespace = {"torch": torch, "causal_mask": parts["causal_mask"],
                 "padding_mask": parts["padding_mask"],
                 "attention": parts["MultiHeadAttention"](d_model=16, num_heads=4).eval(),
                 "x": torch.randn(2, 6, 16)}
    code = python_block("01-attention", "en", "(left padding")
    assert code == python_block("01-attention", "es", "(relleno a la izquierda")
    exec(code.replace("print(", "shown = ("), namespace)
    once, twice = namespace["shown"]
    assert once.tolist() == [[True, True, True, False, False, False]]
    assert twice.all()
    text = prose("01-attention", "en")
    assert "queries 0-2, the pads themselves, would see nothing" in text
    assert "every real token's output turns NaN too" in text
    assert "query 0 would see nothing" not in text
    assert "las queries 0-2, los propios pads, no verían nada" in prose("01-attention", "es")


# -- 02 --------------------------------------------------------------------------------------------
def test_the_lowest_frequency_is_the_one_the_prose_gives():
    lowest = 10000 ** (-(32 - 2) / 32)
    assert round(1 / lowest) == 5623
    for lang in ("en", "es"):
        text = prose("02-layers", lang)
        assert "1/5623" in text and "10000^{-(d_{model}-2)/d_{model}}" in text
        assert "from 1 to $1/10000$" not in text and "de 1 a $1/10000$" not in text


def test_a_fixed_offset_is_the_same_rotation_of_the_encoding_at_every_position():
    d_model, k = 32, 3
    rate = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angle = torch.arange(64, dtype=torch.float64)[:, None] * rate
    sin, cos = angle.sin(), angle.cos()                       # columns 2i and 2i+1 of the table
    turn_sin, turn_cos = (k * rate).sin(), (k * rate).cos()   # depends on k and i, not on p
    assert torch.allclose(sin[k:], sin[:-k] * turn_cos + cos[:-k] * turn_sin)
    assert torch.allclose(cos[k:], cos[:-k] * turn_cos - sin[:-k] * turn_sin)
    assert "is the same linear function of $PE_p$ at every position" in prose("02-layers", "en")
    assert "es la misma función lineal de $PE_p$ en todas las posiciones" in prose("02-layers",
                                                                                  "es")


def test_masking_makes_the_regressor_blind_to_padding_and_no_mask_is_not():
    rows = dict((name, (float(a), float(b))) for name, a, b in re.findall(
        r"(masked|unmasked) *: error " + NUMBER + ", with 10 more pads " + NUMBER,
        printed("02-layers", "demo-padding")))
    masked, unmasked = rows["masked"], rows["unmasked"]
    assert abs(masked[0] - masked[1]) <= 0.001                 # its error does not move
    assert unmasked[1] > unmasked[0] + 0.01                    # the unmasked one's grows
    assert masked[0] < unmasked[0] < 0.2                       # both learn; the mask does better
    assert "only works if the padding is masked" not in prose("02-layers", "en")
    assert "would count them as digits" not in prose("02-layers", "en")


def test_the_regressors_figures_are_the_benchmarks_and_the_notebook_prints_one_in_range():
    error, baseline = map(float, re.search(r"sequences: " + NUMBER + r" \(always answering their "
                                           r"mean, [\d.]+: " + NUMBER,
                                           printed("02-layers", "demo-regressor")).groups())
    assert "(0.024 to 0.065)" in BENCH and "0.089 to 0.148" in BENCH
    assert 0.024 <= error <= 0.065 and round(baseline, 2) == 0.96
    text = prose("02-layers", "en")
    assert "**0.96**" in text and "0.024 to 0.065" in text and "0.09 to 0.15" in text


def test_a_deep_post_norm_stack_passes_its_first_layer_less_gradient_and_pre_norm_does_not():
    rows = {int(depth): (post, pre) for depth, post, pre in figures(
        r"(\d+) layers: first layer's gradient / last layer's: +post-norm " + NUMBER
        + " +pre-norm " + NUMBER, printed("02-layers", "demo-depth"))}
    assert sorted(rows) == [6, 24, 48, 96]
    post = [rows[depth][0] for depth in sorted(rows)]
    assert post == sorted(post, reverse=True)          # "falls as the stack deepens"
    assert rows[6][0] > 0.9                            # "almost as much gradient as the last"
    assert rows[96][0] < 0.2                           # "less than a fifth"
    assert all(pre > 1 for _, pre in rows.values())    # "more than the last at every depth"
    assert abs(rows[6][1] - rows[6][0]) < 0.25         # "at 6 layers the two differ little"
    for lang, gone in (("en", "however deep the stack"), ("es", "por profunda que sea la pila")):
        assert gone not in prose("02-layers", lang)
    assert "less than a fifth" in prose("02-layers", "en")
    assert "menos de una quinta parte" in prose("02-layers", "es")


def test_the_gradient_ratios_hold_for_other_seeds_of_the_course_layer():
    """Seeds 1 and 2 of the course's EncoderLayer: post-norm's first layer gets under a fifth of
    the last one's gradient at 96 layers, pre-norm's more than the last."""
    EncoderLayer = solved("02-layers")["EncoderLayer"]

    def first_over_last(seed, depth, pre_norm):
        torch.manual_seed(seed)
        layers = [EncoderLayer(32, 4, 128, 0.0) for _ in range(depth)]
        x, direction = torch.randn(16, 10, 32), torch.randn(16, 10, 32)
        for layer in layers:
            if pre_norm:
                h = layer.norm1(x)
                x = x + layer.self_attn(h, h, None)
                x = x + layer.ffn(layer.norm2(x))
            else:
                x = layer(x)
        if pre_norm:
            x = torch.nn.functional.layer_norm(x, (32,))
        (x * direction).sum().backward()
        size = [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm()
                for layer in (layers[0], layers[-1])]
        return (size[0] / size[1]).item()

    for seed in (1, 2):
        assert first_over_last(seed, 96, False) < 0.2
        assert first_over_last(seed, 96, True) > 1


# -- 03 --------------------------------------------------------------------------------------------
def test_the_recipe_figures_are_the_benchmarks():
    assert "accuracy **min 99.5%** (seed 38)" in BENCH and "mean 99.89%" in BENCH
    assert "50 seeds (0-49)" in BENCH
    assert "Trained from 50 different seeds, this recipe sorted 99.5%" in prose("03-sorting", "en")
    assert "99.9% on average" in prose("03-sorting", "en")
    assert "usual small-scale version" not in prose("03-sorting", "en")


def test_label_smoothing_gives_every_other_token_eps_over_v():
    eps, vocab = 0.1, 11
    right, other = 1 - eps + eps / vocab, eps / vocab
    floor = -(right * math.log(right) + (vocab - 1) * other * math.log(other))
    assert (round(right, 3), round(other, 4), round(floor, 3)) == (0.909, 0.0091, 0.514)
    assert "every other token $\\varepsilon / V$" in prose("03-sorting", "en")


def test_the_loss_starts_near_19_far_above_a_uniform_guess_and_the_papers_init_starts_near_it():
    first = float(re.search(r"first loss " + NUMBER, printed("03-sorting", "demo-train")).group(1))
    assert 15 < first < 23 and "ln 11 = 2.40" in printed("03-sorting", "demo-train")
    losses = [float(x) for x in re.findall(r"loss " + NUMBER, printed("03-sorting", "demo-init"))]
    default, small, uniform = losses
    assert default > 10 and small < 4 and round(uniform, 1) == 2.4
    assert "near 19" in prose("03-sorting", "en")


def test_the_trained_cross_attention_looks_at_the_digit_being_written():
    shares = [float(share) / 100 for share in re.findall(
        r"head \d+ (\d+)%", printed("03-sorting", "demo-payoff"))]
    assert len(shares) == 4
    assert max(shares) >= 0.8 and sorted(shares)[len(shares) // 2] >= 0.6, shares


def test_other_lengths_mostly_fail_and_teacher_forcing_shows_the_exposure_bias():
    rows = {int(row[0]): row[1:] for row in figures(
        r"length +(\d+): sequences +" + NUMBER + r"% +digits +" + NUMBER
        + r"% +teacher forcing: sequences +" + NUMBER + r"% +digits +" + NUMBER + "%",
        printed("03-sorting", "demo-lengths"))}
    assert sorted(rows) == [6, 8, 10, 12, 14]
    for length, (greedy, greedy_digits, forced, forced_digits) in rows.items():
        assert greedy == forced                      # the whole-sequence column is the same
        if length == 10:
            assert greedy >= 99 and forced_digits == greedy_digits
        else:
            assert greedy < 50                        # "it mostly fails, the short ones included"
            assert forced_digits > greedy_digits + 5  # exposure bias, seen in the digits
    text = prose("03-sorting", "en")
    assert "Positions 10 to 13 (counting from 0)" in text and "11-14" not in text


def test_without_positions_the_sorter_still_sorts_and_is_blind_to_the_order_of_its_source():
    rows = {name: tuple(map(float, numbers)) for name, *numbers in re.findall(
        r"(with positions|without) *: sorted +" + NUMBER + r"% \(length 12: +" + NUMBER
        + r"%\) +largest move of a logit when the sources are shuffled: (\d\.\de[+-]\d+)",
        printed("03-sorting", "demo-nope"))}
    assert set(rows) == {"with positions", "without"}
    (sorted_with, _, moved_with), (sorted_without, at_12, moved_without) = (
        rows["with positions"], rows["without"])
    assert sorted_with >= 99 and sorted_without >= 99     # "it still sorts ten digits"
    assert moved_without < 1e-4                           # "none of its logits beyond rounding"
    assert moved_with > 1000 * moved_without              # "by far more"
    assert at_12 < 50                                     # "fails too, more often than not"
    assert "decoder can count how many tokens" not in prose("03-sorting", "en")
    for lang, words in (("en", "Will the model without positions still sort ten digits?"),
                        ("es", "¿El modelo sin posiciones seguirá ordenando diez dígitos?")):
        assert words in prose("03-sorting", lang)


def test_the_untrained_model_is_sure_of_the_token_it_reads_and_right_where_the_digit_repeats():
    lines = printed("03-sorting", "demo-init").splitlines()
    rows = figures(r"loss " + NUMBER + r" +predicts the token it reads +" + NUMBER
                   + r"% +top probability " + NUMBER, "\n".join(lines))
    (default_loss, default_reads, default_sure), (small_loss, small_reads, small_sure) = rows
    assert default_reads == small_reads == 100          # it copies, at both sizes of E
    assert default_sure >= 0.99                          # "sure" ... "falls from 1.00"
    assert 0.7 <= small_sure <= 0.9                      # "to about 0.8"
    repeats = float(re.search(r"repeats the one read: " + NUMBER + "%",
                              printed("03-sorting", "demo-init")).group(1))
    assert 30 <= repeats <= 40                           # "about a third of the positions"
    expected = (10 - 10 * (1 - 0.9 ** 10)) / 10          # repeats among 9 neighbours, per position
    assert abs(repeats / 100 - expected) < 0.02
    solution = solved("03-sorting")                      # other seeds copy too
    x, y = solution["sorting_batch"](1000, generator=torch.Generator().manual_seed(123))
    decoder_input = solution["shift_right"](y, solution["BOS"])
    for seed in (1, 2):
        torch.manual_seed(seed)
        model = solution["Transformer"](solution["VOCAB_SIZE"], dropout=0.0).eval()
        with torch.no_grad():
            logits = model(x, decoder_input)
        assert bool((logits.argmax(-1) == decoder_input).all())
        assert logits.softmax(-1).max(-1).values.mean() > 0.99
    text = prose("03-sorting", "en")
    assert "sure of a random token" not in text and "sure of the token it has just *read*" in text
    assert "está seguro del token que acaba de *leer*" in prose("03-sorting", "es")
    assert "from 1.00 to about 0.8" in text and "de 1,00 a cerca de 0,8" in prose("03-sorting", "es")


def test_without_sqrt_d_model_and_at_the_papers_peak_the_sorter_does_as_well():
    """The sorting notebook's sections 1 and 2 quote bench/ablations.py (seeds 0-2; no warm-up,
    seed 0): neither the factor nor the lower peak nor the warm-up is needed at this size."""
    unscaled = [ablation("no-sqrt", seed) for seed in range(3)]
    peak = [ablation("peak-0.018", seed) for seed in range(3)]
    recipe = [ablation("recipe", seed) for seed in range(3)]
    no_warmup = ablation("no-warmup", 0)
    losses = sorted(row["loss"] for row in unscaled)
    assert (losses[0], losses[-1]) == (0.515, 0.516)
    assert all(row["greedy"] == 100 for row in unscaled + peak + recipe)
    assert no_warmup["greedy"] == 99.9
    en, es = (prose("03-sorting", lang).replace(" > ", " ") for lang in ("en", "es"))
    assert "a loss of 0.515 to 0.516 and sorted 100% of section 6's sequences" in en
    assert "una pérdida de 0,515 a 0,516 y ordenaron el 100 % de las secuencias" in es
    assert "seeds 0, 1 and 2 sorted 100% of section 6's sequences, and seed 0 sorted 99.9%" in en
    assert "la semilla 0 ordenó el 99,9 % sin ningún warmup" in es
    assert "only trains worse" not in en and "far too large" not in en
    assert "solo entrena peor" not in es and "demasiado para Adam" not in es
    assert "hard enough to need every part" not in en and "necesitar cada pieza" not in es
    assert "the factor $\\sqrt{d_{model}}$ (section 1), the warm-up and the lower peak" in en


def test_break_it_on_purpose_quotes_the_benchmark_and_its_loss_is_close_to_the_working_models():
    row = ablation("no-mask", 0)
    working = float(re.search(r"loss after [\d,]+ steps: " + NUMBER,
                              printed("03-sorting", "demo-train")).group(1))
    assert abs(row["loss"] - working) < 0.02             # "close to the working model's"
    for lang, words in (("en", "a loss of {loss}, close to the working model's, and teacher "
                                "forcing gets {forced} of the sequences right; greedy decoding "
                                "sorts {greedy}"),
                        ("es", "una pérdida de {loss}, cerca de la del modelo que funciona, y "
                               "teacher forcing acierta el {forced} de las secuencias; la "
                               "decodificación greedy ordena el {greedy}")):
        shown = {"loss": f"{row['loss']:.3f}", "forced": f"{row['forced']:.1f}%",
                 "greedy": f"{row['greedy']:.1f}%"}
        if lang == "es":
            shown = {name: spanish(value) for name, value in shown.items()}
        assert words.format(**shown) in prose("03-sorting", lang)
    assert python_block("03-sorting", "en", "### Break it on purpose") == python_block(
        "03-sorting", "es", "### Romperlo a propósito")


@pytest.mark.slow
def test_break_it_on_purpose_prints_what_its_answer_says(capsys):
    """The exercise's own code, run on the course's solution (about 10-20 CPU seconds)."""
    torch.set_num_threads(1)
    namespace = solved("03-sorting")
    namespace["train_sorter"].__globals__["tqdm"] = lambda iterable, **_: iterable
    exec(python_block("03-sorting", "en", "### Break it on purpose"), namespace)
    loss, forced, greedy = map(float, re.search(
        r"loss " + NUMBER + r" +teacher forcing " + NUMBER + r"% +greedy " + NUMBER + "%",
        capsys.readouterr().out).groups())
    row = ablation("no-mask", 0)            # "these figures can differ slightly"
    assert abs(loss - row["loss"]) < 0.01 and abs(forced - row["forced"]) < 1.5, (loss, forced)
    assert greedy <= 0.5 and row["greedy"] == 0.0, greedy


def test_the_sorted_answers_habits_are_computed_exactly():
    def starts_with_0(n):
        return 1 - 0.9 ** n

    def both(n):
        return 1 - 2 * 0.9 ** n + 0.8 ** n

    shown = {n: (round(100 * starts_with_0(n)), round(100 * both(n))) for n in (6, 10, 14)}
    assert shown == {6: (47, 20), 10: (65, 41), 14: (77, 59)}
    en, es = prose("03-sorting", "en"), prose("03-sorting", "es")
    assert "starts with 0 65% of the time" in en and "does both 41% of the time" in en
    assert "at length 6 these are 47% and 20%, at length 14, 77% and 59%" in en
    assert "empieza con 0 el 65 % de las veces" in es and "el 41 % de las veces" in es
    assert "con longitud 6 son el 47 % y el 20 %, con 14, el 77 % y el 59 %" in es
    assert "usually starts with 0" not in en and "One guess at why" not in en


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_every_time_on_one_free_core_says_what_a_shared_machine_does(assignment):
    nb = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    for cell in nb.cells:
        text = " ".join(notebook.text(cell).split())
        for free, shared in (("on one free core", "shared machine"),
                             ("en un núcleo libre", "máquina compartida")):
            if free in text:
                assert shared in text, text[:120]


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_each_notebook_has_a_reflection_question_pitfalls_and_collapsed_grading_notes(assignment):
    for lang, question, pitfalls, note in (("en", "**Predict, then run.**", "**Pitfalls**",
                                            "<b>Grading note</b>"),
                                           ("es", "**Predice y después ejecuta.**",
                                            "**Errores frecuentes**",
                                            "<b>Nota sobre la calificación</b>")):
        text = prose(assignment, lang)
        assert question in text and pitfalls in text
        assert text.count("<details>") == text.count("</details>") >= 2
        assert note in text


QUESTION = {"en": ("**Predict, then run.**", "**Predict first.**"),
            "es": ("**Predice y después ejecuta.**", "**Predice primero.**")}


def parts_with_a_stub(assignment: str, lang: str) -> dict[str, str]:
    """Each numbered section ("## 1 · ...") that holds a stub -> its prose in `lang`."""
    nb = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    parts, heading, has_stub = {}, None, {}
    for cell in nb.cells:
        text = notebook.text(cell)
        if notebook.lang(cell) == "en" and text.startswith("## "):
            heading = text.splitlines()[0]
            parts[heading], has_stub[heading] = "", False
        elif heading and notebook.lang(cell) == lang:
            parts[heading] += " " + text
        elif heading and notebook.is_solution(cell):
            has_stub[heading] = True
    return {heading: text for heading, text in parts.items() if has_stub[heading]}


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_every_part_with_a_stub_asks_the_student_to_predict_then_run(assignment):
    for lang in ("en", "es"):
        parts = parts_with_a_stub(assignment, lang)
        assert len(parts) >= 3
        missing = [heading for heading, text in parts.items()
                   if not any(question in text for question in QUESTION[lang])]
        assert not missing, f"{assignment} ({lang}): no reflection question in {missing}"


def test_the_untrained_attention_maps_point_to_the_trained_one_by_its_section_name():
    for lang, section in (("en", '"What the trained model looks at"'),
                          ("es", "«Qué mira el modelo entrenado»")):
        assert f"## {section[1:-1]}" in prose("03-sorting", lang)
        for assignment in ("01-attention", "02-layers"):
            text = prose(assignment, lang)
            assert text.count(section) >= 1 and ("uniform" in text), (assignment, lang)
