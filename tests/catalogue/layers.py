"""Bugs in 02-layers: positions, feed-forward, encoder and decoder layers, the classifier."""
from . import bug

A = "02-layers"
SIN_COS = ("table[:, 0::2] = torch.sin(position * rate)\n"
           "    table[:, 1::2] = torch.cos(position * rate)")
RATE = "10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)"
ENC_ATTN = "x = self.norm1(x + self.dropout(self.self_attn(x, x, mask)))"
ENC_FFN = "return self.norm2(x + self.dropout(self.ffn(x)))"
DEC_CROSS = "y = self.norm2(y + self.dropout(self.cross_attn(y, memory, memory_mask)))"
LAYERS = ("nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)\n"
          "                                    for _ in range(num_layers))")

BUGS = [
    # positional encoding
    bug("positions_sin_cos_swapped", A, "positions-code", SIN_COS,
        "table[:, 0::2] = torch.cos(position * rate)\n"
        "    table[:, 1::2] = torch.sin(position * rate)", {"positions.values"}),
    bug("positions_exponent_not_divided", A, "positions-code", RATE,
        "10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float32))", {"positions.values"}),
    bug("positions_i_instead_of_2i", A, "positions-code", RATE,
        "10000 ** (-torch.arange(0, d_model // 2, dtype=torch.float32) / d_model)",
        {"positions.values"}),
    # feed-forward
    bug("ffn_relu_after_linear2", A, "ffn-code", "self.linear2(F.relu(self.linear1(x)))",
        "F.relu(self.linear2(self.linear1(x)))", {"ffn.values"}),
    bug("ffn_linear2_without_bias", A, "ffn-code", "nn.Linear(d_ff, d_model)",
        "nn.Linear(d_ff, d_model, bias=False)", {"ffn.structure", "ffn.values"}),
    bug("ffn_typo_in_init", A, "ffn-code", "self.linear1 = nn.Linear(", "self.linear1 = nn.linear(",
        {"ffn.structure", "ffn.values"}),
    # encoder layer
    bug("encoder_pre_norm", A, "encoder-code", ENC_ATTN + "\n        " + ENC_FFN,
        "x = x + self.dropout(self.self_attn(self.norm1(x), self.norm1(x), mask))\n"
        "        return x + self.dropout(self.ffn(self.norm2(x)))", {"encoder.values"}),
    bug("encoder_ffn_without_residual", A, "encoder-code", ENC_FFN,
        "return self.norm2(self.dropout(self.ffn(x)))", {"encoder.values"}),
    bug("encoder_ignores_mask", A, "encoder-code", "self.self_attn(x, x, mask)",
        "self.self_attn(x, x)", {"encoder.mask"}),
    bug("encoder_dropout_always_on", A, "encoder-code", "self.dropout = nn.Dropout(dropout)",
        "self.p = dropout", {"encoder.dropout"},
        more=[("self.dropout(self.self_attn(x, x, mask))",
               "F.dropout(self.self_attn(x, x, mask), self.p)"),
              ("self.dropout(self.ffn(x))", "F.dropout(self.ffn(x), self.p)")]),
    bug("encoder_one_norm_twice", A, "encoder-code", "self.norm2 = nn.LayerNorm(d_model)",
        "self.norm2 = self.norm1", {"encoder.params"}),
    bug("encoder_typo_in_init", A, "encoder-code", "self.norm1 = nn.LayerNorm(",
        "self.norm1 = nn.Layernorm(", {"encoder.params", "encoder.values"}),
    # decoder layer
    bug("decoder_cross_attends_to_itself", A, "decoder-code", "self.cross_attn(y, memory,",
        "self.cross_attn(y, y,", {"decoder.memory"}),
    bug("decoder_ignores_self_mask", A, "decoder-code", "self.self_attn(y, y, self_mask)",
        "self.self_attn(y, y)", {"decoder.masks"}),
    bug("decoder_masks_swapped", A, "decoder-code", "self.self_attn(y, y, self_mask)",
        "self.self_attn(y, y, memory_mask)", {"decoder.masks"},
        more=[("memory, memory_mask)))", "memory, self_mask)))")]),
    bug("decoder_cross_without_residual", A, "decoder-code", DEC_CROSS,
        "y = self.norm2(self.dropout(self.cross_attn(y, memory, memory_mask)))",
        {"decoder.values"}),
    bug("decoder_queries_from_memory", A, "decoder-code", "self.cross_attn(y, memory,",
        "self.cross_attn(memory, y,", {"decoder.memory"}),
    # classifier
    bug("classifier_pools_over_pads", A, "classifier-code",
        "(x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1)", "x.mean(dim=1)",
        {"classifier.padding"}),
    bug("classifier_no_padding_mask", A, "classifier-code", "x = layer(x, mask)", "x = layer(x)",
        {"classifier.padding"}),
    bug("classifier_layers_in_list", A, "classifier-code", LAYERS,
        "[EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]",
        {"classifier.structure"}),
    bug("classifier_one_layer_reused", A, "classifier-code", LAYERS,
        "nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)",
        {"classifier.structure"}),
    bug("classifier_no_sqrt_d_model", A, "classifier-code", " * math.sqrt(self.d_model)", "",
        {"classifier.values"}),
    bug("classifier_softmax_not_log", A, "classifier-code", "F.log_softmax(", "F.softmax(",
        {"classifier.logprobs"}),
]
