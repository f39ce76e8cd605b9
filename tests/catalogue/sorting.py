"""Bugs in 03-sorting: the Transformer, the schedule, teacher forcing, greedy decoding."""
from . import bug

A = "03-sorting"
EMBED = "self.embedding(tokens) * math.sqrt(self.d_model) + self.positions[: tokens.shape[1]]"
ENCODER = ("nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)\n"
           "                                     for _ in range(num_layers))")
NOAM = "d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)"
SHIFT = "torch.cat([start, y[:, :-1]], dim=1)"

BUGS = [
    # the model
    bug("model_untied_output", A, "model-code", "self.dropout = nn.Dropout(dropout)",
        "self.dropout = nn.Dropout(dropout)\n"
        "        self.out = nn.Linear(d_model, vocab_size, bias=False)", {"model.tied"},
        more=[("return y @ self.embedding.weight.T", "return self.out(y)")]),
    bug("model_output_detached", A, "model-code", "y @ self.embedding.weight.T",
        "y @ self.embedding.weight.detach().T", {"model.tied"}),
    bug("model_no_sqrt_d_model", A, "model-code", EMBED,
        "self.embedding(tokens) + self.positions[: tokens.shape[1]]", {"model.embed"}),
    bug("model_no_positions", A, "model-code", EMBED,
        "self.embedding(tokens) * math.sqrt(self.d_model)", {"model.embed"}),
    bug("model_layers_in_list", A, "model-code", ENCODER,
        "[EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]",
        {"model.params"}),
    bug("model_one_layer_reused", A, "model-code", ENCODER,
        "nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)",
        {"model.params"}),
    bug("model_decoder_blocks_diagonal", A, "model-code",
        "causal_mask(tgt_in.shape[1]).to(tgt_in.device)",
        "torch.ones(tgt_in.shape[1], tgt_in.shape[1], dtype=torch.bool).triu()",
        {"model.causal"}),
    bug("model_encoder_ignores_src_mask", A, "model-code", "x = layer(x, src_mask)",
        "x = layer(x)", {"model.padding"}),
    # the schedule
    bug("noam_without_d_model_factor", A, "schedule-code", NOAM,
        "min(step ** -0.5, step * warmup ** -1.5)", {"schedule.noam"}),
    bug("noam_warmup_power", A, "schedule-code", NOAM,
        "d_model ** -0.5 * min(step ** -0.5, step * warmup ** -0.5)", {"schedule.noam"}),
    # teacher forcing and the smoothing floor
    bug("shift_drops_first_token", A, "teacher-code", SHIFT, "torch.cat([start, y[:, 1:]], dim=1)",
        {"teacher.shift"}),
    bug("floor_forgets_eps_over_vocab", A, "teacher-code", "right = 1 - eps + eps / vocab_size",
        "right = 1 - eps", {"teacher.floor"}),
    # greedy decoding
    bug("greedy_emits_bos", A, "greedy-code", '        logits[:, bos] = float("-inf")\n', "",
        {"greedy.no_bos"}),
    bug("greedy_returns_bos", A, "greedy-code", "return out[:, 1:]", "return out",
        {"greedy.length"}),
    bug("greedy_reads_first_position", A, "greedy-code", "model.decode(out, memory)[:, -1]",
        "model.decode(out, memory)[:, 0]", {"greedy.last_position"}),
    bug("greedy_samples", A, "greedy-code", "logits.argmax(dim=-1, keepdim=True)",
        "torch.multinomial(logits.softmax(dim=-1), 1)", {"greedy.reference"}),
    bug("greedy_encodes_every_step", A, "greedy-code", "model.decode(out, memory)",
        "model.decode(out, model.encode(src))", {"greedy.encoder_once"}),
    # trained with the course's recipe: the point is that the model does not learn to sort
    bug("shift_missing", A, "teacher-code", SHIFT, "y", {"teacher.shift", "trained.accuracy"},
        train=True),
    bug("model_decoder_without_causal_mask", A, "model-code",
        "y = layer(y, memory, mask, memory_mask)", "y = layer(y, memory, None, memory_mask)",
        {"model.causal", "trained.accuracy"}, train=True),
]
