"""Bugs in 01-attention: scaled dot-product attention, multi-head attention, the masks."""
from alternatives import ANNOTATED_ATTENTION

from . import bug

A = "01-attention"
SCALE = "q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])"
FILL = 'scores = scores.masked_fill(mask, float("-inf"))'
SPLIT = "x.view(x.shape[0], x.shape[1], self.num_heads, self.d_k).transpose(1, 2)"
CAUSAL = "torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)"
PADDING = "(tokens == pad_id)[:, None, None, :]"

BUGS = [
    # scaled dot-product attention. A wrong scale is one cause: it costs sdpa.values, where the
    # message names the scale, and not sdpa.mask as well (exact).
    bug("sdpa_no_scale", A, "sdpa-code", SCALE, "q @ k.transpose(-2, -1)",
        {"sdpa.values": "sqrt(d_k)"}, exact=True),
    bug("sdpa_scale_by_d_k", A, "sdpa-code", SCALE, "q @ k.transpose(-2, -1) / q.shape[-1]",
        {"sdpa.values": "sqrt(d_k)"}, exact=True),
    bug("sdpa_scale_by_sqrt_d_v", A, "sdpa-code", SCALE,
        "q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])", {"sdpa.values": ("sqrt(d_v)", "d_k")},
        exact=True),
    bug("sdpa_softmax_over_queries", A, "sdpa-code", "softmax(dim=-1)", "softmax(dim=-2)",
        {"sdpa.softmax": "last axis", "sdpa.values": "last axis"}),
    bug("sdpa_k_dot_T", A, "sdpa-code", "k.transpose(-2, -1)", "k.T", {"sdpa.shapes": "transpose"}),
    bug("sdpa_mask_inverted", A, "sdpa-code", FILL,
        'scores = scores.masked_fill(~mask, float("-inf"))', {"sdpa.mask": "inverted"}),
    bug("sdpa_mask_eq_0_convention", A, "sdpa-code", FILL,
        "scores = scores.masked_fill(mask == 0, -1e9)", {"sdpa.mask": "inverted"}),
    bug("sdpa_masked_fill_zero", A, "sdpa-code", FILL, "scores = scores.masked_fill(mask, 0)",
        {"sdpa.mask": "-inf"}),
    bug("sdpa_softmax_before_mask", A, "sdpa-code",
        FILL + "\n    weights = scores.softmax(dim=-1)",
        "weights = scores.softmax(dim=-1).masked_fill(mask, 0.0)\n"
        "    else:\n        weights = scores.softmax(dim=-1)",
        {"sdpa.mask": "before the softmax"}),
    bug("sdpa_returns_scores", A, "sdpa-code", "return weights @ v, weights",
        "return weights @ v, scores", {"sdpa.softmax": "scores", "sdpa.values": ()}),
    # A student who ported the Annotated Transformer and kept its mask convention (True = keep):
    # the attention function is wrong, and only it. Its MultiHeadAttention (the port's, which
    # passes dropout= to the attention function) is right and must not lose a point for it.
    bug("annotated_mask_polarity_kept", A, "sdpa-code", "scores.masked_fill(mask, -1e9)",
        "scores.masked_fill(mask == 0, -1e9)", {"sdpa.mask": "inverted"},
        port=ANNOTATED_ATTENTION),
    # multi-head attention
    bug("mha_split_without_transpose", A, "mha-code", SPLIT,
        "x.view(x.shape[0], self.num_heads, x.shape[1], self.d_k)",
        {"mha.self": "transpose", "mha.cross": ()}),
    bug("mha_merge_without_transpose", A, "mha-code",
        "out.transpose(1, 2).reshape(", "out.reshape(", {"mha.self": "transpose", "mha.cross": ()}),
    bug("mha_merge_view_not_contiguous", A, "mha-code", "out.transpose(1, 2).reshape(",
        "out.transpose(1, 2).view(",
        {"mha.self": "reshape", "mha.cross": "reshape", "mha.mask": "reshape"}),
    bug("mha_keys_values_from_x_q", A, "mha-code",
        "split(self.w_k(x_kv)), split(self.w_v(x_kv))",
        "split(self.w_k(x_q)), split(self.w_v(x_q))", {"mha.cross": "x_kv"}),
    bug("mha_no_output_projection", A, "mha-code", "return self.w_o(out)", "return out",
        {"mha.self": "w_o", "mha.cross": ()}),
    bug("mha_ignores_mask", A, "mha-code", "scaled_dot_product_attention(q, k, v, mask)",
        "scaled_dot_product_attention(q, k, v)", {"mha.mask": "does not reach the attention"}),
    # masks. A mask that blocks the diagonal equals the inverse of the right one at size 1: the
    # message must still name the diagonal.
    bug("causal_blocks_diagonal", A, "masks-code", CAUSAL,
        "torch.ones(T, T, dtype=torch.bool).triu(diagonal=0)", {"masks.causal": "diagonal"}),
    bug("causal_triu_diagonal_0_uint8", A, "masks-code", CAUSAL,
        "torch.triu(torch.ones((T, T)), diagonal=0).type(torch.uint8) == 1",
        {"masks.causal": "diagonal"}),
    bug("causal_inverted_tril", A, "masks-code", CAUSAL, "torch.tril(torch.ones(T, T)).bool()",
        {"masks.causal": "inverted"}),
    bug("causal_float_mask", A, "masks-code", CAUSAL, "torch.ones(T, T).triu(diagonal=1)",
        {"masks.causal": "bool"}),
    bug("padding_on_query_axis", A, "masks-code", PADDING, "(tokens == pad_id)[:, None, :, None]",
        {"masks.padding": "query axis"}),
    bug("padding_inverted", A, "masks-code", PADDING, "(tokens != pad_id)[:, None, None, :]",
        {"masks.padding": "inverted"}),
]

# issue 23: layers and attention
MHA_CALL = "out, self.attention_weights = scaled_dot_product_attention(q, k, v, mask)"
BUGS += [
    bug("mha_no_attention_weights", A, "mha-code", MHA_CALL,
        "out, _ = scaled_dot_product_attention(q, k, v, mask)",
        {"mha.mask": "self.attention_weights"}, exact=True),
    bug("mha_attention_weights_averaged", A, "mha-code", MHA_CALL,
        "out, weights = scaled_dot_product_attention(q, k, v, mask)\n"
        "        self.attention_weights = weights.mean(dim=1)",
        {"mha.mask": ("attention_weights", "[2, 3, 6, 7]")}, exact=True),
    bug("mha_scaled_twice", A, "mha-code", "q, k, v = split(self.w_q(x_q)),",
        "q, k, v = split(self.w_q(x_q)) / math.sqrt(self.d_k),",
        {"mha.self": "twice", "mha.cross": "twice", "mha.mask": "twice"}),
    # The Annotated Transformer's MultiHeadAttention adds the head axis to its [B, 1, Tk] masks;
    # the course's masks have it already
    bug("mha_mask_unsqueezed_annotated", A, "mha-code", MHA_CALL,
        "if mask is not None:\n            mask = mask.unsqueeze(1)\n        " + MHA_CALL,
        {"mha.mask": ("[B, 1, 1, Tk]", "unsqueeze")}),
]

# issue 23, the mutation run's survivor: every other check builds MultiHeadAttention(12, 3)
BUGS += [
    # `&` typed for `%`: (12 & 3) == 0 passes, (12 & 4) == 4 refuses a valid size
    bug("mha_head_check_bitand", A, "mha-code", "assert d_model % num_heads == 0",
        "assert d_model & num_heads == 0", {"mha.structure": ("MultiHeadAttention(12, 4)",
                                                              "multiple")}, exact=True),
]

# written into an argument: the right values, and the caller's q scaled in place
BUGS += [
    bug("sdpa_scales_q_in_place", A, "sdpa-code",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
        "q /= math.sqrt(q.shape[-1])\n    scores = q @ k.transpose(-2, -1)",
        {"sdpa.values": ("scaled_dot_product_attention changed its argument q in place",
                         "q.clone()")},
        es={"sdpa.values": ("scaled_dot_product_attention modificó in place su argumento q",
                            "q.clone()")}),
]

# Bugs whose first messages named no cause: a crash on the checks' inputs (the scores of the wrong
# shape, values from the query side) is named from the function's output on square inputs, where
# the bug runs; a swap of two projections from the reference with them swapped.
SQUARE = {"sdpa.shapes", "sdpa.softmax", "sdpa.values", "sdpa.mask"}
BUGS += [
    bug("sdpa_q_at_k_untransposed", A, "sdpa-code", SCALE, "q @ k / math.sqrt(q.shape[-1])",
        dict.fromkeys(SQUARE, ("without transposing k", "q @ k.transpose(-2, -1)")),
        es=dict.fromkeys(SQUARE, ("sin transponer k", "q @ k.transpose(-2, -1)"))),
    bug("sdpa_k_at_q_transposed", A, "sdpa-code", SCALE,
        "k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])",
        dict.fromkeys(SQUARE, ("k @ q.transpose(-2, -1)", "one row per query")),
        es=dict.fromkeys(SQUARE, ("k @ q.transpose(-2, -1)", "una fila por query"))),
    bug("mha_values_from_x_q", A, "mha-code", "split(self.w_v(x_kv))", "split(self.w_v(x_q))",
        {"mha.cross": ("the values come from x_q", "v = w_v(x_kv)"),
         "mha.mask": ("the values come from x_q", "v = w_v(x_kv)")},
        es={"mha.cross": ("los values vienen de x_q", "v = w_v(x_kv)")}),
    bug("mha_w_q_w_k_swapped", A, "mha-code", "split(self.w_q(x_q)), split(self.w_k(x_kv)),",
        "split(self.w_k(x_q)), split(self.w_q(x_kv)),",
        {"mha.self": "w_q and w_k are swapped", "mha.cross": "w_q and w_k are swapped"},
        es={"mha.self": "w_q y w_k están intercambiadas"}),
]

# the result of masked_fill dropped: the scores stay as they were, so the mask changes nothing, and
# "fill the scores with -inf" repeats what the student believes they did
BUGS += [
    bug("sdpa_masked_fill_result_dropped", A, "sdpa-code", FILL,
        'scores.masked_fill(mask, float("-inf"))',
        {"sdpa.mask": ("no effect", "new tensor", "masked_fill_")}, exact=True,
        es={"sdpa.mask": ("ningún efecto", "tensor nuevo", "masked_fill_")}),
]

# the result of softmax dropped: the weights returned are the scores, and "take the softmax"
# repeats what the student believes they did
BUGS += [
    bug("sdpa_softmax_result_dropped", A, "sdpa-code", "weights = scores.softmax(dim=-1)",
        "scores.softmax(dim=-1)\n    weights = scores",
        {"sdpa.softmax": ("the scores, not the weights", "new tensor", "keep its result"),
         "sdpa.values": ()},
        es={"sdpa.softmax": ("tensor nuevo", "guarda su resultado")}),
]
