"""Bugs in 03-sorting: the Transformer, the schedule, teacher forcing, greedy decoding."""
from alternatives import ANNOTATED_LOG_SOFTMAX, NANOGPT_SORTING

from . import bug

A = "03-sorting"
EMBED = "self.embedding(tokens) * math.sqrt(self.d_model) + self.positions[: tokens.shape[1]]"
ENCODER = ("nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)\n"
           "                                     for _ in range(num_layers))")
NOAM = "d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)"
SHIFT = "torch.cat([start, y[:, :-1]], dim=1)"
# A separate output layer is one mistake, reported once, by model.tied, in the contract's words:
# an extra, separate layer (the other checks do not also call its weights "missing").
UNTIED = {"model.tied": ("separate", "extra")}

BUGS = [
    # the model
    bug("model_untied_output", A, "model-code", "self.dropout = nn.Dropout(dropout)",
        "self.dropout = nn.Dropout(dropout)\n"
        "        self.out = nn.Linear(d_model, vocab_size, bias=False)", UNTIED,
        more=[("return y @ self.embedding.weight.T", "return self.out(y)")], exact=True),
    bug("model_extra_lm_head_with_bias", A, "model-code",
        "self.embedding = nn.Embedding(vocab_size, d_model)",
        "self.lm_head = nn.Linear(d_model, vocab_size)\n"
        "        self.embedding = nn.Embedding(vocab_size, d_model)", UNTIED,
        more=[("return y @ self.embedding.weight.T", "return self.lm_head(y)")], exact=True),
    # nanoGPT ported without its weight-tying line: a separate output layer, registered first
    bug("nanogpt_tying_line_forgotten", A, "model-code",
        "        self.embedding.weight = self.lm_head.weight\n", "", UNTIED, exact=True,
        port=NANOGPT_SORTING),
    bug("model_output_detached", A, "model-code", "y @ self.embedding.weight.T",
        "y @ self.embedding.weight.detach().T", {"model.tied": "detach"}),
    # the same through .data: tied in the forward pass, no gradient from the logits to the embedding
    bug("model_output_weight_data", A, "model-code", "y @ self.embedding.weight.T",
        "y @ self.embedding.weight.data.T", {"model.tied": ".data"}),
    # probabilities are not logits (log-probabilities are, up to a constant per row): one cause,
    # named where the logits are compared, and the tying itself is right
    bug("model_returns_probabilities", A, "model-code", "return y @ self.embedding.weight.T",
        "return (y @ self.embedding.weight.T).softmax(dim=-1)",
        {check: ("probabilities", "return the logits") for check in
         ("model.values", "model.causal", "model.padding")}, exact=True,
        es=dict.fromkeys(("model.values", "model.causal", "model.padding"),
                         ("son probabilidades", "devuelve los logits"))),
    # the Annotated Transformer's log_softmax Generator, its projection detached: log-probabilities
    # are fine, and the gradient is still held to the model's own outputs
    bug("annotated_log_softmax_detached", A, "+model-code", "F.log_softmax(self.proj(x), dim=-1)",
        "F.log_softmax(x @ self.proj.weight.detach().T, dim=-1)", {"model.tied": "detach"},
        exact=True, port=ANNOTATED_LOG_SOFTMAX,
        es={"model.tied": "detach"}),
    bug("model_no_sqrt_d_model", A, "model-code", EMBED,
        "self.embedding(tokens) + self.positions[: tokens.shape[1]]",
        {"model.embed": "sqrt(d_model)"}),
    bug("model_no_positions", A, "model-code", EMBED,
        "self.embedding(tokens) * math.sqrt(self.d_model)", {"model.embed": "positional encoding"}),
    bug("model_layers_in_list", A, "model-code", ENCODER,
        "[EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]",
        {"model.params": "ModuleList"}),
    bug("model_one_layer_reused", A, "model-code", ENCODER,
        "nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)",
        {"model.params": "share"}),
    bug("model_decoder_blocks_diagonal", A, "model-code",
        "causal_mask(tgt_in.shape[1]).to(tgt_in.device)",
        "torch.ones(tgt_in.shape[1], tgt_in.shape[1], dtype=torch.bool).triu()",
        {"model.causal": "itself"}),
    bug("model_encoder_ignores_src_mask", A, "model-code", "x = layer(x, src_mask)",
        "x = layer(x)", {"model.padding": "src_mask"}),
    # the schedule
    bug("noam_without_d_model_factor", A, "schedule-code", NOAM,
        "min(step ** -0.5, step * warmup ** -1.5)", {"schedule.noam": "d_model"}),
    bug("noam_warmup_power", A, "schedule-code", NOAM,
        "d_model ** -0.5 * min(step ** -0.5, step * warmup ** -0.5)",
        {"schedule.noam": "warm-up"}),
    # teacher forcing and the smoothing floor
    bug("shift_drops_first_token", A, "teacher-code", SHIFT, "torch.cat([start, y[:, 1:]], dim=1)",
        {"teacher.shift": "y_0"}),
    bug("floor_forgets_eps_over_vocab", A, "teacher-code", "right = 1 - eps + eps / vocab_size",
        "right = 1 - eps", {"teacher.floor": "right token"}),
    # greedy decoding
    bug("greedy_emits_bos", A, "greedy-code", '        logits[:, bos] = float("-inf")\n', "",
        {"greedy.no_bos": "exclude"}),
    bug("greedy_returns_bos", A, "greedy-code", "return out[:, 1:]", "return out",
        {check: ("BOS", "first column") for check in ("greedy.no_bos", "greedy.last_position",
                                                      "greedy.encoder_once", "greedy.reference",
                                                      "greedy.length")}),
    bug("greedy_reads_first_position", A, "greedy-code", "model.decode(out, memory)[:, -1]",
        "model.decode(out, memory)[:, 0]", {"greedy.last_position": "last position"}),
    bug("greedy_samples", A, "greedy-code", "logits.argmax(dim=-1, keepdim=True)",
        "torch.multinomial(logits.softmax(dim=-1), 1)", {"greedy.reference": "argmax"}),
    # the memory of the first source only (decoding per row goes wrong, BOS is still left out):
    # no message may blame BOS or the length
    bug("greedy_first_source_only", A, "greedy-code", "memory = model.encode(src)",
        "memory = model.encode(src[:1].expand_as(src))",
        {"greedy.no_bos": ("left BOS out", "same tokens for every source"),
         "greedy.last_position": "same tokens for every source",
         "greedy.reference": "argmax", "greedy.length": ("5 tokens a row", "of 5 rows")}),
    bug("greedy_encodes_every_step", A, "greedy-code", "model.decode(out, memory)",
        "model.decode(out, model.encode(src))", {"greedy.encoder_once": "once"}),
    # trained with the course's recipe: the point is that the model does not learn to sort (both
    # are in catalogue.TWO_PARTS: the training check trains the student's own parts)
    bug("shift_missing", A, "teacher-code", SHIFT, "y",
        {"teacher.shift": "unchanged", "trained.accuracy": ()}, train=True),
    bug("model_decoder_without_causal_mask", A, "model-code",
        "y = layer(y, memory, mask, memory_mask)", "y = layer(y, memory, None, memory_mask)",
        {"model.causal": "future", "trained.accuracy": ()}, train=True),
]

# issue 23: the review's wins and the mutation run's survivor
BUGS += [
    # torch.zeros(y.shape) then filled: float token ids, which the embedding cannot index
    bug("shift_float_tokens", A, "teacher-code", SHIFT,
        "torch.cat([start, y[:, :-1]], dim=1).float()", {"teacher.shift": ("integer", "float32")},
        exact=True),
    # a default of the signature changed: sequences of 64 tokens get no positions
    # written into its argument: the right value, and the caller's targets overwritten (the
    # training loop's y is then the shifted input); every stub's arguments must stay as they were
    bug("shift_in_place", A, "teacher-code",
        "    start = torch.full_like(y[:, :1], bos)\n"
        "    return torch.cat([start, y[:, :-1]], dim=1)",
        "    out = y\n    out[:, 1:] = y[:, :-1].clone()\n    out[:, 0] = bos\n    return out",
        {"teacher.shift": ("shift_right changed its argument y in place", "y.clone()")},
        exact=True,
        es={"teacher.shift": ("shift_right modificó in place su argumento y", "y.clone()")}),
    bug("model_default_max_len_short", A, "model-code", "max_len=64):", "max_len=50):",
        {"model.embed": ("max_len=64", "64 tokens")}, exact=True),
]

# Bugs whose first messages named no cause: a crash (named from the model's output where the bug
# runs: tokens [2, 1], tgt_in as long as the memory, a model with vocab_size = d_model), numbers
# alone, or a shape alone; each is named now from the reference computed with that bug.
MODEL = ("model.tied", "model.embed", "model.values", "model.causal", "model.padding")
FLOOR_RIGHT = "right = 1 - eps + eps / vocab_size"
FLOOR_OTHER = "other = eps / vocab_size"
BUGS += [
    bug("model_positions_off_by_one", A, "model-code", EMBED,
        "self.embedding(tokens) * math.sqrt(self.d_model) + self.positions[1: tokens.shape[1] + 1]",
        {"model.embed": ("off by one", "self.positions[:T]")},
        es={"model.embed": ("corridas en uno", "self.positions[:T]")}),
    bug("model_positions_sliced_on_columns", A, "model-code", EMBED,
        "self.embedding(tokens) * math.sqrt(self.d_model) + self.positions[:, : tokens.shape[1]]",
        dict.fromkeys(MODEL, ("wrong axis", "self.positions[:T]")),
        es={"model.embed": ("eje equivocado", "self.positions[:T]")}),
    bug("model_decoder_masks_swapped", A, "model-code", "y = layer(y, memory, mask, memory_mask)",
        "y = layer(y, memory, memory_mask, mask)",
        dict.fromkeys(("model.values", "model.causal", "model.padding"),
                      ("masks swapped", "layer(y, memory, causal_mask, memory_mask)")),
        es={"model.values": ("máscaras intercambiadas",
                             "layer(y, memory, causal_mask, memory_mask)")}),
    bug("model_causal_mask_from_memory", A, "model-code", "causal_mask(tgt_in.shape[1])",
        "causal_mask(memory.shape[1])",
        dict.fromkeys(("model.tied", "model.values", "model.causal", "model.padding"),
                      ("memory's length", "causal_mask(tgt_in.shape[1])")),
        es={"model.values": ("longitud de la memoria", "causal_mask(tgt_in.shape[1])")}),
    bug("model_logits_not_transposed", A, "model-code", "return y @ self.embedding.weight.T",
        "return y @ self.embedding.weight",
        dict.fromkeys(("model.tied", "model.values", "model.causal", "model.padding"),
                      ("without transposing", "y @ self.embedding.weight.T")),
        es={"model.values": ("sin transponer", "y @ self.embedding.weight.T")}),
    # passes every visible check of the notebook's model (one layer): a visible check runs two
    bug("model_encoder_layers_read_embedding", A, "model-code",
        "x = layer(x, src_mask)\n        return x", "out = layer(x, src_mask)\n        return out",
        {"model.values": ("reads the embedding", "previous layer's output"),
         "model.padding": ("reads the embedding", "previous layer's output")},
        es={"model.values": ("lee el embedding", "la salida de la capa anterior")}),
    bug("noam_d_model_and_warmup_swapped", A, "schedule-code", NOAM,
        "warmup ** -0.5 * min(step ** -0.5, step * d_model ** -1.5)",
        {"schedule.noam": "d_model and warmup are swapped"},
        es={"schedule.noam": "d_model y warmup están intercambiados"}, exact=True),
    bug("floor_spread_over_v_minus_1", A, "teacher-code", FLOOR_RIGHT, "right = 1 - eps",
        {"teacher.floor": ("vocab_size - 1 tokens", "fairseq")}, exact=True,
        more=[(FLOOR_OTHER, "other = eps / (vocab_size - 1)")],
        es={"teacher.floor": ("vocab_size - 1 tokens", "fairseq")}),
    bug("floor_spread_over_v_minus_2", A, "teacher-code", FLOOR_RIGHT, "right = 1 - eps",
        {"teacher.floor": ("vocab_size - 2 tokens", "Annotated Transformer")}, exact=True,
        more=[(FLOOR_OTHER, "other = eps / (vocab_size - 2)"),
              ("(vocab_size - 1) * other", "(vocab_size - 2) * other")],
        es={"teacher.floor": ("vocab_size - 2 tokens", "Annotated Transformer")}),
    bug("floor_sign_dropped", A, "teacher-code", "return -(right * math.log(right)",
        "return (right * math.log(right)", {"teacher.floor": "the sign is wrong"}, exact=True,
        es={"teacher.floor": "el signo está mal"}),
    bug("greedy_default_length_from_batch", A, "greedy-code",
        "length = src.shape[1] if length is None", "length = src.shape[0] if length is None",
        {check: ("the batch size", "src.shape[1]") for check in
         ("greedy.no_bos", "greedy.last_position", "greedy.encoder_once", "greedy.reference",
          "greedy.length")},
        es={"greedy.length": ("el tamaño del lote", "src.shape[1]")}),
]
