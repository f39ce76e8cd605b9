"""Reproductions from an independent review of the 02-layers and 03-sorting graders (h11-review).

name -> {assignment, answers (grade_id -> code; other answer cells get the course's solution),
what it tries}; `attempts()` fills in the cells that start from the course's solution. Build each
with tests/conftest.py's make_submission and grade it; RESULTS says what each got.
"""

SOLUTION_CLASSIFIER_INIT = '''
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.register_buffer("positions", positional_encoding(max_len, d_model), persistent=False)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)
                                    for _ in range(num_layers))
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_classes)
'''
SOLUTION_REGRESSOR_INIT = '''
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1, pad_id=0,
                 max_len=64):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.register_buffer("positions", positional_encoding(max_len, d_model), persistent=False)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)
                                    for _ in range(num_layers))
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, 1)
'''


def _head(cls, init, body):
    return f"class {cls}(nn.Module):\n{init}\n    def forward(self, tokens):\n{body}"


# The classifier/regressor body, with `{mask}` and `{pool}` to fill.
BODY = '''        T = tokens.shape[1]
        x = self.embedding(tokens) * math.sqrt(self.d_model) + self.positions[:T]
        x = self.dropout(x)
        mask = {mask}
        for layer in self.layers:
            x = layer(x, mask)
        real = (tokens != self.pad_id).unsqueeze(-1).float()
        pooled = {pool}
'''
MASKED_MEAN = "(x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1)"
CLASSIFIER_OUT = "        return F.log_softmax(self.head(pooled), dim=-1)\n"
REGRESSOR_OUT = "        return self.head(pooled).squeeze(-1)\n"


def classifier(mask="padding_mask(tokens, self.pad_id)", pool=MASKED_MEAN, extra=""):
    return _head("EncoderClassifier", SOLUTION_CLASSIFIER_INIT,
                 BODY.format(mask=mask, pool=pool) + extra + CLASSIFIER_OUT)


def regressor(mask="padding_mask(tokens, self.pad_id)", pool=MASKED_MEAN, extra=""):
    return _head("EncoderRegressor", SOLUTION_REGRESSOR_INIT,
                 BODY.format(mask=mask, pool=pool) + extra + REGRESSOR_OUT)


# A cache that answers a batch without pads from the rows of the last padded batch: the model
# includes the pads in its mean (a real bug), and answers "alone" with what it said padded.
CACHE = '''
_ANSWERS = {}


def remember(tokens, pad_id, out):
    """Rows of a padded batch by their real tokens; a batch without pads, from those rows."""
    if bool((tokens == pad_id).any()):
        for row, value in zip(tokens.tolist(), out):
            while row and row[-1] == pad_id:
                row = row[:-1]
            _ANSWERS[tuple(row)] = value.detach().clone()
        return out
    rows = [_ANSWERS.get(tuple(row)) for row in tokens.tolist()]
    if all(row is not None for row in rows):
        return torch.stack(rows)
    return out
'''

FIXED_DROPOUT_HELPER = '''
def fixed_dropout(s, p, training):
    """Not dropout: the same first round(p * d) features of every position are always zeroed."""
    if not training or p == 0:
        return s
    keep = (torch.arange(s.shape[-1]) >= round(p * s.shape[-1])).to(s.dtype)
    return s * keep / (1 - p)
'''

ATTEMPTS = {
    "encoder_fixed_dropout": {
        "assignment": "02-layers",
        "what": "encoder.dropout without randomness: the same features dropped every call",
        "answers": {"encoder-code": FIXED_DROPOUT_HELPER + '''

class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.p = dropout

    def forward(self, x, mask=None):
        x = self.norm1(x + fixed_dropout(self.self_attn(x, x, mask), self.p, self.training))
        return self.norm2(x + fixed_dropout(self.ffn(x), self.p, self.training))
'''}},
    "decoder_fixed_dropout": {
        "assignment": "02-layers",
        "what": "decoder.dropout without randomness: the same features dropped every call",
        "answers": {"decoder-code": FIXED_DROPOUT_HELPER + '''

class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.p = dropout

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        drop = lambda s: fixed_dropout(s, self.p, self.training)
        y = self.norm1(y + drop(self.self_attn(y, y, self_mask)))
        y = self.norm2(y + drop(self.cross_attn(y, memory, memory_mask)))
        return self.norm3(y + drop(self.ffn(y)))
'''}},
    "decoder_masked_memory_mean": {
        "assignment": "02-layers",
        "what": "decoder.memory without cross-attention: the mean of the unmasked memory added",
        "answers": {"decoder-code": '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        y = self.norm1(y + self.dropout(self.self_attn(y, y, self_mask)))
        keep = torch.ones(memory.shape[:2], dtype=memory.dtype)
        if memory_mask is not None:
            keep = (~memory_mask.bool()).reshape(memory.shape[0], -1)[:, -memory.shape[1]:]
            keep = keep.to(memory.dtype)
        mean = (memory * keep[..., None]).sum(1, keepdim=True) / keep.sum(1)[:, None, None]
        y = self.norm2(y + mean)
        return self.norm3(y + self.dropout(self.ffn(y)))
'''}},
    "classifier_cache_padding": {
        "assignment": "02-layers",
        "what": "classifier.padding with the pads in the mean, answered 'alone' from a cache",
        "answers": {"classifier-code": CACHE + "\n\n" + classifier(
            pool="x.mean(dim=1)",
            extra="        out = F.log_softmax(self.head(pooled), dim=-1)\n"
                  "        return remember(tokens, self.pad_id, out)\n")},
    },
    "regressor_cache_padding": {
        "assignment": "02-layers",
        "what": "regressor.padding with the pads in the mean, answered 'alone' from a cache",
        "answers": {"regressor-code": CACHE + "\n\n" + regressor(
            pool="x.mean(dim=1)",
            extra="        return remember(tokens, self.pad_id, self.head(pooled).squeeze(-1))\n")},
    },
    "classifier_annotated_3d_mask": {
        "assignment": "02-layers",
        "what": "realistic bug: the Annotated Transformer's [B, 1, T] mask given to the course's "
                "layers (wrong with the real MultiHeadAttention: it lines up with the heads)",
        "answers": {"classifier-code": classifier(mask="(tokens == self.pad_id).unsqueeze(-2)"),
                    "regressor-code": regressor(mask="(tokens == self.pad_id).unsqueeze(-2)")},
    },
    "heads_additive_float_mask": {
        "assignment": "02-layers",
        "what": "realistic bug: BERT's additive float mask (0 / -10000) given to the course's "
                "layers, whose masked_fill refuses a float mask",
        "answers": {
            "classifier-code": classifier(
                mask="(tokens == self.pad_id)[:, None, None, :].float() * -10000.0"),
            "regressor-code": regressor(
                mask="(tokens == self.pad_id)[:, None, None, :].float() * -10000.0")},
    },
    "heads_flat_mask": {
        "assignment": "02-layers",
        "what": "realistic bug: a [B, T] mask given to the layers (the real attention lines it up "
                "with the queries)",
        "answers": {"classifier-code": classifier(mask="tokens == self.pad_id"),
                    "regressor-code": regressor(mask="tokens == self.pad_id")},
    },
    "classifier_no_layers": {
        "assignment": "02-layers",
        "what": "classifier.padding/logprobs with no encoder layers: a masked mean of embeddings",
        "answers": {"classifier-code": classifier(
            mask="padding_mask(tokens, self.pad_id)\n"
                 "        layers, self.layers = self.layers, nn.ModuleList()",
            extra="        self.layers = layers\n")},
    },
    "positions_linear_ramp": {
        "assignment": "02-layers",
        "what": "positions.shape with no sinusoid at all",
        "answers": {"positions-code": '''
def positional_encoding(T, d_model):
    return torch.arange(T, dtype=torch.float32)[:, None].expand(T, d_model).clone()
'''}},
    "positions_reads_outside": {
        "assignment": "02-layers",
        "what": "read what it should not: list the file system, read the reference, the graders "
                "and other submissions; put what it finds in an error message",
        "answers": {"positions-code": '''
import os


def positional_encoding(T, d_model):
    found = []
    for path in ("/", "..", "../..", "/work", "/work/main", "/tmp", os.getcwd()):
        try:
            found.append(f"{path}: {sorted(os.listdir(path))[:30]}")
        except OSError as error:
            found.append(f"{path}: {type(error).__name__}")
    for path in ("/work/main/source/02-layers/layers.ipynb", "/work/main/autograder/test_layers.py",
                 "/etc/passwd"):
        try:
            found.append(f"{path}: {open(path).read(80)!r}")
        except OSError as error:
            found.append(f"{path}: {type(error).__name__}")
    raise RuntimeError(" | ".join(found))
'''}},
    "greedy_constant_count": {
        "assignment": "03-sorting",
        "what": "greedy.last_position with an input-independent answer (0, 3, 6, 9, 2, ...: the "
                "stand-in's 'count' model after BOS), no model call at all",
        "answers": {"greedy-code": '''
def greedy_decode(model, src, bos, length=None):
    length = src.shape[1] if length is None else length
    steps = torch.arange(length) * 3 % 10
    return steps.expand(src.shape[0], length).clone()
'''}},
    "greedy_decodes_garbage": {
        "assignment": "03-sorting",
        "what": "greedy.encoder_once: encode once, call decode once per token on BOS alone, "
                "return zeros (no decoding)",
        "answers": {"greedy-code": '''
def greedy_decode(model, src, bos, length=None):
    length = src.shape[1] if length is None else length
    memory = model.encode(src)
    start = torch.full((src.shape[0], 1), bos, dtype=torch.long)
    for _ in range(length):
        model.decode(start, memory)
    return torch.zeros(src.shape[0], length, dtype=torch.long)
'''}},
    "shift_float_tokens": {
        "assignment": "03-sorting",
        "what": "realistic bug: shift_right returns float token ids (torch.zeros then filled); "
                "docs/verdicts.md says token ids must be integer tensors",
        "answers": {"teacher-code": '''
def shift_right(y, bos):
    out = torch.zeros(y.shape)
    out[:, 0] = bos
    out[:, 1:] = y[:, :-1]
    return out


def smoothing_floor(eps, vocab_size):
    right = 1 - eps + eps / vocab_size
    other = eps / vocab_size
    if other == 0:
        return 0.0
    return -(right * math.log(right) + (vocab_size - 1) * other * math.log(other))
'''}},
}

# d2l's TransformerEncoder keeps each block's attention weights as it runs (its idiom); the
# classifier's checks put stand-in layers in `layers`, which have no self_attn.
ATTEMPTS["d2l_records_attention_weights"] = {
    "assignment": "02-layers",
    "what": "a correct classifier that, as d2l does, keeps each layer's attention weights",
    "answers": {"classifier-code": classifier(
        mask="padding_mask(tokens, self.pad_id)\n"
             "        self.attention_weights = [None] * len(self.layers)",
        extra="        for i, blk in enumerate(self.layers):\n"
              "            self.attention_weights[i] = blk.self_attn.attention_weights\n")},
}


DECODER_HEAD = """
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        y = self.norm1(y + self.dropout(self.self_attn(y, y, self_mask)))
"""
ATTEMPTS["decoder_memory_mean_tanh"] = {
    "assignment": "02-layers",
    "what": "decoder.memory without cross-attention: tanh of the memory's mean added (the "
            "catalogue's decoder_memory_mean_added fails only because the check shifts every "
            "feature of the memory by the same 1.5, which the LayerNorm removes)",
    "answers": {"decoder-code": DECODER_HEAD + """\
        y = self.norm2(y + torch.tanh(memory.mean(dim=1, keepdim=True)))
        return self.norm3(y + self.dropout(self.ffn(y)))
"""}}

ATTEMPTS["model_causal_padding_without_layers"] = {
    "assignment": "03-sorting",
    "what": "model.causal and model.padding with no encoder or decoder layer: a running mean "
            "of the target's embeddings, plus tanh of the masked mean of the memory",
    "answers": {"model-code": None}}      # the solution's cell, then LAZY_MODEL (see below)

LAZY_MODEL = """

def masked_mean(x, mask=None):
    keep = torch.ones(x.shape[:2]) if mask is None else \\
        (~mask.bool()).reshape(x.shape[0], -1).float()
    return (x * keep[..., None]).sum(1, keepdim=True) / keep.sum(1)[:, None, None]


class Transformer(Transformer):
    def encode(self, src, src_mask=None):
        x = self.embed(src)
        return x + torch.tanh(masked_mean(x, src_mask))

    def decode(self, tgt_in, memory, memory_mask=None):
        y = self.embed(tgt_in)
        y = y.cumsum(1) / torch.arange(1, y.shape[1] + 1)[None, :, None]
        return (y + torch.tanh(masked_mean(memory, memory_mask))) @ self.embedding.weight.T
"""

ATTEMPTS["sandbox_listing"] = {
    "assignment": "02-layers",
    "what": "what the sandbox shows: /sandbox's tree and the process table",
    "answers": {"positions-code": """
import os


def positional_encoding(T, d_model):
    found = []
    for top in ("/sandbox/lib", "/sandbox/python"):
        for folder, subfolders, files in os.walk(top):
            if folder.count("/") <= 4 and "site-packages" not in folder:
                found.append(f"{folder}: {sorted(files)[:12]}")
    raise RuntimeError(" | ".join(found)[-1500:])
""", "ffn-code": """
import os


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        found = [f"pid {os.getpid()}", f"uid {os.getuid()}", f"cwd {os.getcwd()}"]
        try:
            found.append(f"proc {sorted(p for p in os.listdir('/proc') if p.isdigit())}")
        except OSError as error:
            found.append(repr(error))
        found.append(f"env {sorted(os.environ)}")
        raise RuntimeError(" | ".join(found)[:1500])
"""}}


def _fill_solution_cells():
    """The cells that reuse the course's solution (tests/conftest.py's solution_cells)."""
    from conftest import solution_cells
    model = solution_cells("03-sorting")["model-code"]
    ATTEMPTS["model_causal_padding_without_layers"]["answers"]["model-code"] = model + LAZY_MODEL

ATTEMPTS["model_tied_weight_data"] = {
    "assignment": "03-sorting",
    "what": "realistic bug: the output layer reads embedding.weight.data (tied in the forward "
            "pass, but no gradient from the logits reaches the embedding)",
    "answers": {"model-code": None}}      # the solution's cell, edited in _fill_solution_cells

ATTEMPTS["ffn_exits_process"] = {
    "assignment": "02-layers",
    "what": "stop the batch: FeedForward's forward ends the student's process (os._exit(0))",
    "answers": {"ffn-code": """
import os


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        os._exit(0)
"""}}


def _fill_tied():
    from conftest import solution_cells
    model = solution_cells("03-sorting")["model-code"]
    old = "return y @ self.embedding.weight.T"
    assert old in model
    ATTEMPTS["model_tied_weight_data"]["answers"]["model-code"] = model.replace(
        old, "return y @ self.embedding.weight.data.T")

ATTEMPTS["decoder_self_running_mean"] = {
    "assignment": "02-layers",
    "what": "decoder.masks without self-attention: a running mean over the earlier positions "
            "(causal by construction), self_mask never used",
    "answers": {"decoder-code": DECODER_HEAD.replace(
        "        y = self.norm1(y + self.dropout(self.self_attn(y, y, self_mask)))\n",
        "        steps = torch.arange(1, y.shape[1] + 1, dtype=y.dtype)[None, :, None]\n"
        "        y = self.norm1(y + torch.tanh(y.cumsum(1) / steps))\n") + """\
        y = self.norm2(y + self.dropout(self.cross_attn(y, memory, memory_mask)))
        return self.norm3(y + self.dropout(self.ffn(y)))
"""}}

ATTEMPTS["encoder_zeroes_masked_inputs"] = {
    "assignment": "02-layers",
    "what": "realistic bug: the masked positions' inputs zeroed, attention run without the mask "
            "(the pads still take attention weight)",
    "answers": {"encoder-code": """
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        if mask is not None:
            x = x.masked_fill(mask.reshape(x.shape[0], -1)[:, :, None], 0.0)
        x = self.norm1(x + self.dropout(self.self_attn(x, x)))
        return self.norm2(x + self.dropout(self.ffn(x)))
"""}}

# What each attempt got when the review graded it (graders at 78813c6; without trained.accuracy
# and regressor.trained unless said): the checks it won that it should not have, or "defended".
RESULTS = {
    "encoder_fixed_dropout": "WON encoder.dropout (29/29 with regressor.trained skipped); "
                             "after issue 23: defended, encoder.dropout lost ('two calls with "
                             "different random seeds gave the same output'; lazy twin "
                             "encoder_fixed_dropout)",
    "decoder_fixed_dropout": "WON decoder.dropout; after issue 23: defended, decoder.dropout lost "
                             "(lazy twin decoder_fixed_dropout)",
    "decoder_masked_memory_mean": "defended: decoder.memory lost (a uniform shift of the memory "
                                  "adds the same to every feature, which the LayerNorm removes); "
                                  "after issue 23 lost by design: with cross_attn blind to its "
                                  "keys and values the output still changes with the memory",
    "decoder_memory_mean_tanh": "WON decoder.memory; lost decoder.values and decoder.masks; after "
                                "issue 23: defended, decoder.memory lost ('with cross_attn made "
                                "blind ...'; lazy twin decoder_memory_mean_tanh)",
    "decoder_self_running_mean": "WON decoder.masks; lost decoder.values only; after issue 23: "
                                 "defended, decoder.masks lost ('with self_attn, cross_attn made "
                                 "to mix no positions ...'; lazy twin decoder_self_running_mean)",
    "classifier_cache_padding": "WON classifier.padding; lost classifier.values (named cause). "
                                "Defended after (heads): padding lost, 'the mean includes the "
                                "padding positions' (fresh sequences are run alone first)",
    "regressor_cache_padding": "WON regressor.padding; lost regressor.values (named cause). "
                               "Defended after (heads): padding and trained lost as well",
    "classifier_annotated_3d_mask": "realistic bug, 29/29 with regressor.trained: the stand-in "
                                    "layers accept a [B, 1, T] mask the real attention misreads. "
                                    "Defended after (heads): the heads' checks that run the model "
                                    "lost, 'with three axes, its first lines up with the heads'",
    "heads_additive_float_mask": "realistic bug, 29/29 with regressor.trained: the stand-in "
                                 "layers accept a float mask the real attention refuses. "
                                 "Defended after (heads): those checks lost, 'not a bool tensor: "
                                 "... an additive float mask ... is another convention'",
    "heads_flat_mask": "defended: lost the heads' checks (the stand-in raises as the real one); "
                       "after (heads) the message names the shape that does not broadcast",
    "classifier_no_layers": "WON classifier.logprobs and classifier.padding with no layers "
                            "(by design in docs/verdicts.md); lost classifier.values",
    "positions_linear_ramp": "WON positions.shape (a check of form); lost positions.values",
    "positions_reads_outside": "defended: the sandbox shows /sandbox/{lib,python,work} only",
    "sandbox_listing": "defended: pid namespace (pids 1, 2), uid 65534, /sandbox/lib holds the "
                       "harness (channel, standins, worker, zygote) and the i18n module only",
    "ffn_exits_process": "defended: ffn.values lost ('your code ended the grading process'), "
                         "every other check graded, the batch went on",
    "greedy_constant_count": "WON greedy.last_position with a constant answer; defended after "
                             "(sorting branch): the count stand-in's first token comes from the "
                             "memory, and last_position says 'the same tokens for every source'",
    "greedy_decodes_garbage": "WON greedy.encoder_once without decoding; defended after: decode "
                              "call 2 got [BOS] instead of BOS and the token chosen",
    "shift_float_tokens": "WON teacher.shift with float ids; with training, trained.accuracy "
                          "lost with a message that blames cell model-code (the embedding); "
                          "defended after: teacher.shift says 'an integer tensor, not float32'",
    "model_causal_padding_without_layers": "WON model.causal and model.padding with no layer; "
                                           "lost model.values only; defended after: both compare "
                                           "with the reference model, and lose",
    "model_tied_weight_data": "defended: model.tied lost, message names .data",
    "encoder_zeroes_masked_inputs": "realistic bug: lost encoder.mask only, but the message says "
                                    "only 'not the expected values' (no cause); after issue 23: "
                                    "the message names it ('self_attn was called without the "
                                    "mask'; catalogue bug encoder_zeroes_masked_inputs)",
    "d2l_records_attention_weights": "a correct d2l idiom lost classifier.logprobs, .padding, "
                                     ".values: 'EncoderLayerProbe' object has no attribute "
                                     "'self_attn' (the stand-in's name in the message). Defended "
                                     "after (heads): full marks (the stand-in layer has a "
                                     "self_attn that keeps attention_weights; alternatives.py "
                                     "D2L_ATTENTION_WEIGHTS)",
}


def attempts() -> dict:
    """ATTEMPTS with the cells that start from the course's solution filled in (tests/ must be on
    sys.path, for conftest)."""
    _fill_solution_cells()
    _fill_tied()
    return ATTEMPTS
