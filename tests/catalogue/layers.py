"""Bugs in 02-layers: positions, feed-forward, encoder and decoder layers, the classifier and the
regressor."""
from alternatives import ANNOTATED_LAYERS

from . import bug

A = "02-layers"
SIN_COS = ("table[:, 0::2] = torch.sin(position * rate)\n"
           "    table[:, 1::2] = torch.cos(position * rate)")
RATE = "10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)"
ENC_ATTN = "x = self.norm1(x + self.dropout(self.self_attn(x, x, mask)))"
ENC_FFN = "return self.norm2(x + self.dropout(self.ffn(x)))"
DEC_SELF = "y = self.norm1(y + self.dropout(self.self_attn(y, y, self_mask)))"
DEC_CROSS = "y = self.norm2(y + self.dropout(self.cross_attn(y, memory, memory_mask)))"
DEC_FFN = "return self.norm3(y + self.dropout(self.ffn(y)))"
DEC_LAYER = DEC_SELF + "\n        " + DEC_CROSS + "\n        " + DEC_FFN
LAYERS = ("nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)\n"
          "                                    for _ in range(num_layers))")

BUGS = [
    # positional encoding
    bug("positions_sin_cos_swapped", A, "positions-code", SIN_COS,
        "table[:, 0::2] = torch.cos(position * rate)\n"
        "    table[:, 1::2] = torch.sin(position * rate)", {"positions.values": "swapped"}),
    bug("positions_exponent_not_divided", A, "positions-code", RATE,
        "10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float32))",
        {"positions.values": "d_model"}),
    bug("positions_i_instead_of_2i", A, "positions-code", RATE,
        "10000 ** (-torch.arange(0, d_model // 2, dtype=torch.float32) / d_model)",
        {"positions.values": "2i"}),
    # feed-forward
    bug("ffn_relu_after_linear2", A, "ffn-code", "self.linear2(F.relu(self.linear1(x)))",
        "F.relu(self.linear2(self.linear1(x)))",
        {"ffn.values": ("ReLU", "between linear1 and linear2")}),
    bug("ffn_linear2_without_bias", A, "ffn-code", "nn.Linear(d_ff, d_model)",
        "nn.Linear(d_ff, d_model, bias=False)",
        {"ffn.structure": "linear2.bias", "ffn.values": "linear2.bias"}),
    bug("ffn_typo_in_init", A, "ffn-code", "self.linear1 = nn.Linear(", "self.linear1 = nn.linear(",
        {"ffn.structure": "no attribute 'linear'", "ffn.values": "no attribute 'linear'"}),
    # encoder layer
    bug("encoder_pre_norm", A, "encoder-code", ENC_ATTN + "\n        " + ENC_FFN,
        "x = x + self.dropout(self.self_attn(self.norm1(x), self.norm1(x), mask))\n"
        "        return x + self.dropout(self.ffn(self.norm2(x)))", {"encoder.values": "pre-norm"}),
    bug("encoder_ffn_without_residual", A, "encoder-code", ENC_FFN,
        "return self.norm2(self.dropout(self.ffn(x)))",
        {"encoder.values": ("feed-forward", "residual")}),
    bug("encoder_ignores_mask", A, "encoder-code", "self.self_attn(x, x, mask)",
        "self.self_attn(x, x)", {"encoder.mask": "without the mask"}),
    bug("encoder_dropout_always_on", A, "encoder-code", "self.dropout = nn.Dropout(dropout)",
        "self.p = dropout", {"encoder.dropout": "eval mode"},
        more=[("self.dropout(self.self_attn(x, x, mask))",
               "F.dropout(self.self_attn(x, x, mask), self.p)"),
              ("self.dropout(self.ffn(x))", "F.dropout(self.ffn(x), self.p)")]),
    bug("encoder_one_norm_twice", A, "encoder-code", "self.norm2 = nn.LayerNorm(d_model)",
        "self.norm2 = self.norm1", {"encoder.params": "norm2"}),
    bug("encoder_typo_in_init", A, "encoder-code", "self.norm1 = nn.LayerNorm(",
        "self.norm1 = nn.Layernorm(",
        {"encoder.params": "no attribute 'Layernorm'",
         "encoder.values": "no attribute 'Layernorm'"}),
    bug("encoder_norms_swapped", A, "encoder-code", ENC_ATTN + "\n        " + ENC_FFN,
        "x = self.norm2(x + self.dropout(self.self_attn(x, x, mask)))\n"
        "        return self.norm1(x + self.dropout(self.ffn(x)))",
        {"encoder.values": ("norm1", "norm2")}),
    # decoder layer
    bug("decoder_cross_attends_to_itself", A, "decoder-code", "self.cross_attn(y, memory,",
        "self.cross_attn(y, y,", {"decoder.memory": "from the memory"}),
    bug("decoder_ignores_self_mask", A, "decoder-code", "self.self_attn(y, y, self_mask)",
        "self.self_attn(y, y)", {"decoder.masks": "self_mask"}),
    bug("decoder_masks_swapped", A, "decoder-code", "self.self_attn(y, y, self_mask)",
        "self.self_attn(y, y, memory_mask)", {"decoder.masks": ("self_mask", "memory_mask")},
        more=[("memory, memory_mask)))", "memory, self_mask)))")]),
    bug("decoder_cross_without_residual", A, "decoder-code", DEC_CROSS,
        "y = self.norm2(self.dropout(self.cross_attn(y, memory, memory_mask)))",
        {"decoder.values": ("cross-attention", "residual")}),
    bug("decoder_queries_from_memory", A, "decoder-code", "self.cross_attn(y, memory,",
        "self.cross_attn(memory, y,", {"decoder.memory": "queries"}),
    # the order of a layer found by the grader is named: pre-norm, not the paper's post-norm
    bug("decoder_pre_norm", A, "decoder-code", DEC_LAYER,
        "h = self.norm1(y)\n"
        "        y = y + self.dropout(self.self_attn(h, h, self_mask))\n"
        "        y = y + self.dropout(self.cross_attn(self.norm2(y), memory, memory_mask))\n"
        "        return y + self.dropout(self.ffn(self.norm3(y)))", {"decoder.values": "pre-norm"}),
    # A port of the Annotated Transformer that kept its SublayerConnection pre-norm, as the
    # Annotated Transformer writes it: both layers are pre-norm (one of the TWO_PARTS), and each
    # says so. Its norm1 = sublayer[0].norm aliases and FeedForward(d, d_ff, dropout) are right.
    bug("annotated_sublayer_left_pre_norm", A, "+encoder-code",
        "return self.norm(x + self.dropout(sublayer(x)))",
        "return x + self.dropout(sublayer(self.norm(x)))",
        {"encoder.values": "pre-norm", "decoder.values": "pre-norm"}, port=ANNOTATED_LAYERS),
    # a layer that builds its FeedForward with the wrong sizes: the stand-in the checks of values
    # swap in runs anyway, so the parameter check reads what FeedForward was built with
    bug("encoder_ffn_arguments_swapped", A, "encoder-code", "FeedForward(d_model, d_ff)",
        "FeedForward(d_ff, d_model)",
        {"encoder.params": ("builds its FeedForward with (d_ff, d_model)",
                            "FeedForward(d_model, d_ff)")}, exact=True,
        es={"encoder.params": ("construye su FeedForward con (d_ff, d_model)",
                               "los argumentos son FeedForward(d_model, d_ff)")}),
    bug("encoder_ffn_d_model_twice", A, "encoder-code", "FeedForward(d_model, d_ff)",
        "FeedForward(d_model, d_model)",
        {"encoder.params": ("(d_model, d_model)", "FeedForward(d_model, d_ff)")}, exact=True,
        es={"encoder.params": ("construye su FeedForward con (d_model, d_model)",
                               "los argumentos son FeedForward(d_model, d_ff)")}),
    bug("decoder_ffn_arguments_swapped", A, "decoder-code", "FeedForward(d_model, d_ff)",
        "FeedForward(d_ff, d_model)",
        {"decoder.params": ("builds its FeedForward with (d_ff, d_model)",
                            "FeedForward(d_model, d_ff)")}, exact=True,
        es={"decoder.params": ("construye su FeedForward con (d_ff, d_model)",
                               "los argumentos son FeedForward(d_model, d_ff)")}),
    # the residual added into the layer's input: the right values, and the caller's x changed
    bug("encoder_residual_in_place", A, "encoder-code", ENC_ATTN,
        "x += self.dropout(self.self_attn(x, x, mask))\n        x = self.norm1(x)",
        {"encoder.values": ("EncoderLayer changed its argument x in place", "x.clone()")},
        es={"encoder.values": ("EncoderLayer modificó in place su argumento x", "x.clone()")}),
    # classifier
    bug("classifier_pools_over_pads", A, "classifier-code",
        "(x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1)", "x.mean(dim=1)",
        {"classifier.padding": "mean"}),
    bug("classifier_no_padding_mask", A, "classifier-code", "x = layer(x, mask)", "x = layer(x)",
        {"classifier.padding": "padding_mask"}),
    bug("classifier_layers_in_list", A, "classifier-code", LAYERS,
        "[EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]",
        {"classifier.structure": "nn.ModuleList"}),
    bug("classifier_one_layer_reused", A, "classifier-code", LAYERS,
        "nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)",
        {"classifier.structure": "share"}),
    bug("classifier_no_sqrt_d_model", A, "classifier-code", " * math.sqrt(self.d_model)", "",
        {"classifier.values": "sqrt(d_model)"}),
    bug("classifier_softmax_not_log", A, "classifier-code", "F.log_softmax(", "F.softmax(",
        {"classifier.logprobs": "log_softmax"}),
]

# regressor (its values, padding and training are checked around stand-in encoder layers)
POOLED = "(x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1)"
PREDICTION = "return self.head(pooled).squeeze(-1)"
BUGS += [
    bug("regressor_mean_over_pads", A, "regressor-code", POOLED, "x.mean(dim=1)",
        {"regressor.padding": ("mean", "padding"), "regressor.values": ("mean", "padding")}),
    bug("regressor_sum_not_mean", A, "regressor-code", POOLED, "(x * real).sum(dim=1)",
        {"regressor.values": ("sum", "not their mean")}),
    bug("regressor_first_token_only", A, "regressor-code", "pooled = " + POOLED, "pooled = x[:, 0]",
        {"regressor.values": "first position"}),
    bug("regressor_relu_on_output", A, "regressor-code", PREDICTION,
        "return F.relu(self.head(pooled)).squeeze(-1)",
        {"regressor.values": ("ReLU", "no activation")}),
    bug("regressor_sigmoid_on_output", A, "regressor-code", PREDICTION,
        "return torch.sigmoid(self.head(pooled)).squeeze(-1)",
        {"regressor.values": ("sigmoid", "no activation"),
         "regressor.trained": ("off by", "fresh sequences")}),
    bug("regressor_output_not_squeezed", A, "regressor-code", PREDICTION,
        "return self.head(pooled)", {"regressor.values": ("one number per sequence", "squeeze")}),
    bug("regressor_no_padding_mask", A, "regressor-code", "x = layer(x, mask)", "x = layer(x)",
        {"regressor.padding": "padding_mask", "regressor.values": "padding_mask"}),
    bug("regressor_head_to_d_model", A, "regressor-code", "self.head = nn.Linear(d_model, 1)",
        "self.head = nn.Linear(d_model, d_model)", {"regressor.structure": "head.weight"},
        more=[(PREDICTION, "return self.head(pooled).mean(-1)")]),
]

# issue 23: the heads
FORWARD = "T = tokens.shape[1]"
TRIMMED = "tokens = tokens[:, :int((tokens != self.pad_id).any(0).nonzero().max()) + 1]\n        "
LAYERS_LOOP = "for layer in self.layers:\n            x = layer(x, mask)"
LOGPROBS = "return F.log_softmax(self.head(pooled), dim=-1)"
TABLE = 'self.register_buffer("positions", positional_encoding(max_len, d_model), persistent=False)'
BUGS += [
    # No mask, the mean over the pads, but the trailing columns that are all pads dropped first:
    # the same output for any number of pads appended to every row.
    bug("classifier_trims_pad_columns", A, "classifier-code", FORWARD, TRIMMED + FORWARD,
        {"classifier.padding": ("neither masked", "mean")},
        more=[("x = layer(x, mask)", "x = layer(x)"), (POOLED, "x.mean(dim=1)")]),
    bug("regressor_trims_pad_columns", A, "regressor-code", FORWARD, TRIMMED + FORWARD,
        {"regressor.padding": ("neither masked", "mean")},
        more=[("x = layer(x, mask)", "x = layer(x)"), (POOLED, "x.mean(dim=1)")]),
    # a lazy twin of the padding check: it reads the first token alone, so no pad can change it
    bug("classifier_reads_first_token_only", A, "classifier-code", "pooled = " + POOLED,
        "pooled = self.embedding(tokens[:, 0])",
        {"classifier.padding": "must depend on its input"}),
    # log-probabilities of the right form that ignore the input, or the parameters
    bug("classifier_constant_logprobs", A, "classifier-code", LOGPROBS,
        "return F.log_softmax(torch.zeros(len(tokens), self.head.out_features), dim=-1)",
        {"classifier.logprobs": "depend on its input"}),
    bug("classifier_logprobs_ignore_parameters", A, "classifier-code", LOGPROBS,
        "return F.log_softmax(tokens[:, :self.head.out_features].float(), dim=-1)",
        {"classifier.logprobs": "with its parameters"}),
    # the encoder frozen, or the pooled vector detached: only the head learns
    bug("regressor_encoder_frozen", A, "regressor-code", LAYERS_LOOP,
        "with torch.no_grad():\n            for layer in self.layers:\n"
        "                x = layer(x, mask)",
        {"regressor.trained": ("no gradient", "torch.no_grad()")}),
    bug("regressor_pooled_detached", A, "regressor-code", PREDICTION,
        "return self.head(pooled.detach()).squeeze(-1)",
        {"regressor.trained": ("no gradient", "detach")}),
    # a pad id hard-coded as 0
    bug("regressor_pad_id_hard_coded", A, "regressor-code", "padding_mask(tokens, self.pad_id)",
        "padding_mask(tokens, 0)", {"regressor.padding": ("equal to 0", "pad_id")},
        more=[("(tokens != self.pad_id)", "(tokens != 0)")]),
    # squeeze() drops the batch's axis too, for a batch of one
    bug("regressor_squeezes_every_axis", A, "regressor-code", PREDICTION,
        "return self.head(pooled).squeeze()",
        {"regressor.values": ("batch of one", "squeeze(-1)")}),
    # each named by its message
    bug("regressor_divides_by_padded_length", A, "regressor-code", POOLED,
        "(x * real).sum(dim=1) / T",
        {"regressor.values": "padded length", "regressor.padding": "padded length"}),
    bug("regressor_no_positions", A, "regressor-code", " + self.positions[:T]", "",
        {"regressor.values": "no positional encoding"}),
    bug("regressor_pools_last_position", A, "regressor-code", "pooled = " + POOLED,
        "pooled = x[:, -1]",
        {"regressor.values": "last position", "regressor.padding": "last position"}),
    bug("regressor_mask_true_keeps", A, "regressor-code",
        "mask = padding_mask(tokens, self.pad_id)",
        "mask = (tokens != self.pad_id)[:, None, None, :]",
        {"regressor.values": "inverted", "regressor.padding": "inverted"}),
    bug("regressor_dropout_in_eval", A, "regressor-code", "x = self.dropout(x)",
        "x = F.dropout(x, self.dropout.p)", {"regressor.values": ("dropout", "eval")}),
    bug("classifier_dropout_in_eval", A, "classifier-code", "x = self.dropout(x)",
        "x = F.dropout(x, self.dropout.p)", {"classifier.values": ("dropout", "eval")}),
    bug("classifier_mask_true_keeps", A, "classifier-code",
        "mask = padding_mask(tokens, self.pad_id)",
        "mask = (tokens != self.pad_id)[:, None, None, :]",
        {"classifier.values": "inverted", "classifier.padding": "inverted"}),
    # A frozen position table kept as a parameter: the numbers are right, the parameters are not
    # the assignment's. It costs the structure point only, whose message names the tensor.
    bug("regressor_frozen_position_table", A, "regressor-code", TABLE,
        "self.positions = nn.Embedding.from_pretrained(positional_encoding(max_len, d_model),\n"
        "                                                      freeze=True)",
        {"regressor.structure": ("positions.weight", "register_buffer")}, exact=True,
        more=[("self.positions[:T]", "self.positions(torch.arange(T))")]),
]

# issue 23, the third review: masks of other conventions given to the layers (the stand-in layers
# refuse them as the real attention does), "a real token" taken as "an id above pad_id", and the
# signature's defaults (dropout=0.1, pad_id=0, max_len=64), which the checks build the model with
MASK = "mask = padding_mask(tokens, self.pad_id)"
BUGS += [
    bug("classifier_annotated_3d_mask", A, "classifier-code", MASK,
        "mask = (tokens == self.pad_id).unsqueeze(-2)",
        {"classifier.values": ("heads", "[B, 1, 1, T]"),
         "classifier.padding": ("heads", "[B, 1, 1, T]")}),
    bug("regressor_additive_float_mask", A, "regressor-code", MASK,
        "mask = (tokens == self.pad_id)[:, None, None, :].float() * -10000.0",
        {"regressor.values": ("not a bool tensor", "additive"),
         "regressor.padding": ("not a bool tensor", "additive"),
         "regressor.trained": ("not a bool tensor", "additive")}),
    bug("classifier_real_tokens_above_pad_id", A, "classifier-code",
        "real = (tokens != self.pad_id)", "real = (tokens > self.pad_id)",
        {"classifier.values": ("below pad_id", "tokens != pad_id")}),
    bug("classifier_default_dropout_changed", A, "classifier-code", "dropout=0.1, pad_id=0",
        "dropout=0.2, pad_id=0", {"classifier.values": ("dropout=0.2", "defaults")}, exact=True),
    bug("regressor_default_pad_id_changed", A, "regressor-code", "pad_id=0,", "pad_id=1,",
        {"regressor.values": ("defaults", "pad_id=0")}, exact=True),
    bug("regressor_default_max_len_short", A, "regressor-code", "max_len=64", "max_len=32",
        {"regressor.values": ("defaults", "max_len=64")}, exact=True),
]

# issue 23: layers and attention
NOISY = ("\n    def noisy(self, h):\n"
         "        return h + 0.05 * torch.randn_like(h) if self.training else h\n")
BUGS += [
    bug("positions_counted_from_1", A, "positions-code",
        "position = torch.arange(T, dtype=torch.float32)",
        "position = torch.arange(1, T + 1, dtype=torch.float32)",
        {"positions.values": ("counted from 1", "torch.arange(T)")}),
    # Lazy twins of the dropout checks: no dropout at all, a little noise in training mode.
    bug("encoder_noise_not_dropout", A, "encoder-code", ENC_ATTN + "\n        " + ENC_FFN,
        "x = self.norm1(x + self.noisy(self.self_attn(x, x, mask)))\n"
        "        return self.norm2(x + self.noisy(self.ffn(x)))",
        {"encoder.dropout": ("dropout=0", "noise")},
        more=[("self.dropout = nn.Dropout(dropout)\n", "self.p = dropout\n" + NOISY)]),
    bug("decoder_noise_scaled_by_p", A, "decoder-code", DEC_LAYER,
        DEC_LAYER.replace("self.dropout(", "self.noisy("),
        {"decoder.dropout": ("no dropout mask", "1/(1-p)")},
        more=[("self.dropout = nn.Dropout(dropout)\n",
               "self.p = dropout\n" + NOISY.replace("0.05 *", "self.p *"))]),
    # dropout that does not rescale, that takes p as the probability to keep, or that sits after
    # the residual add
    bug("encoder_dropout_not_rescaled", A, "encoder-code", ENC_ATTN + "\n        " + ENC_FFN,
        "x = self.norm1(x + self.drop(self.self_attn(x, x, mask)))\n"
        "        return self.norm2(x + self.drop(self.ffn(x)))",
        {"encoder.dropout": "1/(1-p)"},
        more=[("self.dropout = nn.Dropout(dropout)\n",
               "self.p = dropout\n\n    def drop(self, h):\n"
               "        return h * (torch.rand_like(h) >= self.p) if self.training else h\n")]),
    # dropout at one sublayer only: the other's message names that sublayer, not the scale
    bug("encoder_dropout_only_at_ffn", A, "encoder-code", ENC_ATTN,
        "x = self.norm1(x + self.self_attn(x, x, mask))",
        {"encoder.dropout": ("self-attention", "without dropout")}),
    bug("decoder_dropout_missing_at_cross", A, "decoder-code", DEC_CROSS,
        "y = self.norm2(y + self.cross_attn(y, memory, memory_mask))",
        {"decoder.dropout": ("cross-attention", "without dropout")}),
    bug("decoder_dropout_keep_probability", A, "decoder-code", "self.dropout = nn.Dropout(dropout)",
        "self.dropout = nn.Dropout(1 - dropout)", {"decoder.dropout": "probability"}),
    bug("decoder_dropout_after_residual", A, "decoder-code", DEC_CROSS,
        "y = self.norm2(self.dropout(y + self.cross_attn(y, memory, memory_mask)))",
        {"decoder.dropout": "before the residual"}),
    # dropout left on in eval mode: the mask check must not blame the mask
    bug("encoder_dropout_training_true", A, "encoder-code", ENC_ATTN + "\n        " + ENC_FFN,
        "x = self.norm1(x + F.dropout(self.self_attn(x, x, mask), self.p, training=True))\n"
        "        return self.norm2(x + F.dropout(self.ffn(x), self.p, training=True))",
        {"encoder.dropout": "eval mode", "encoder.mask": ("dropout", "eval mode"),
         "encoder.values": ("dropout", "eval mode")},
        more=[("self.dropout = nn.Dropout(dropout)", "self.p = dropout")]),
    # the masked positions' inputs zeroed, attention run without the mask (issue 23's review):
    # nothing masked leaks, but the pads still take attention weight
    bug("encoder_zeroes_masked_inputs", A, "encoder-code", ENC_ATTN,
        "if mask is not None:\n"
        "            x = x.masked_fill(mask.reshape(x.shape[0], -1)[:, :, None], 0.0)\n"
        "        x = self.norm1(x + self.dropout(self.self_attn(x, x)))",
        {"encoder.mask": ("self_attn was called without the mask", "pass the layer's mask")},
        exact=True),
    # the two masks in the wrong order in the signature: every decoder check names the swap
    bug("decoder_mask_arguments_swapped", A, "decoder-code",
        "def forward(self, y, memory, self_mask=None, memory_mask=None):",
        "def forward(self, y, memory, memory_mask=None, self_mask=None):",
        {"decoder.masks": "swapped", "decoder.values": "swapped", "decoder.memory": "swapped",
         "decoder.dropout": "swapped"}),
]

# Bugs whose first messages named no cause ("not the expected values"): each is named now from the
# reference computed with that bug (the grader's signature of it), and only where the output is it.
FFN_FORWARD = "self.linear2(F.relu(self.linear1(x)))"
BUGS += [
    bug("positions_exponent_sign_dropped", A, "positions-code", RATE,
        "10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)",
        {"positions.values": ("exponent has the wrong sign", "10000 ** (-2i / d_model)")},
        es={"positions.values": ("el exponente tiene el signo cambiado",
                                 "10000 ** (-2i / d_model)")}),
    bug("positions_divided_by_T", A, "positions-code", RATE,
        "10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / T)",
        {"positions.values": ("divided by T", "divide it by d_model")},
        es={"positions.values": ("dividido por T", "divídelo por d_model")}),
    bug("positions_sin_cos_in_halves", A, "positions-code", SIN_COS,
        "table[:, :d_model // 2] = torch.sin(position * rate)\n"
        "    table[:, d_model // 2:] = torch.cos(position * rate)",
        {"positions.values": ("two halves", "interleaved")},
        es={"positions.values": ("dos mitades", "intercaladas")}),
    bug("ffn_without_relu", A, "ffn-code", FFN_FORWARD, "self.linear2(self.linear1(x))",
        {"ffn.values": ("there is no ReLU", "linear2(relu(linear1(x)))")},
        es={"ffn.values": ("no hay ReLU", "linear2(relu(linear1(x)))")}),
    bug("ffn_relu_before_linear1", A, "ffn-code", FFN_FORWARD,
        "self.linear2(self.linear1(F.relu(x)))",
        {"ffn.values": ("before linear1", "between linear1 and linear2")},
        es={"ffn.values": ("antes de linear1", "entre linear1 y linear2")}),
    bug("ffn_gelu_not_relu", A, "ffn-code", "F.relu(", "F.gelu(",
        {"ffn.values": ("GELU", "uses ReLU")}, es={"ffn.values": ("GELU", "usa ReLU")}),
    bug("ffn_dropout_always_on", A, "ffn-code", FFN_FORWARD,
        "self.linear2(F.dropout(F.relu(self.linear1(x)), 0.1))",
        {"ffn.values": ("eval mode", "dropout left on")},
        es={"ffn.values": ("en modo eval", "dropout encendido")}),
    bug("encoder_without_first_norm", A, "encoder-code", ENC_ATTN,
        "x = x + self.dropout(self.self_attn(x, x, mask))",
        {"encoder.values": ("self-attention sublayer has no LayerNorm", "norm1")},
        es={"encoder.values": ("la subcapa de self-attention no tiene LayerNorm", "norm1")}),
    bug("encoder_ffn_reads_layer_input", A, "encoder-code", ENC_ATTN + "\n        " + ENC_FFN,
        "h = self.norm1(x + self.dropout(self.self_attn(x, x, mask)))\n"
        "        return self.norm2(h + self.dropout(self.ffn(x)))",
        {"encoder.values": ("feed-forward sublayer reads the layer's input",
                            "previous step's output")},
        es={"encoder.values": ("la subcapa feed-forward lee la entrada de la capa",
                               "la salida del paso anterior")}),
    bug("regressor_positions_off_by_one", A, "regressor-code", "self.positions[:T]",
        "self.positions[1:T + 1]", {"regressor.values": ("off by one", "self.positions[:T]")},
        es={"regressor.values": ("corridas en uno", "self.positions[:T]")}),
]
