"""Independent review (attack23) of the graders made stricter by issue 23 (02-layers, 03-sorting).

ATTEMPTS: name -> (assignment, kind, {grade_id: [(old, new), ...]}): each is the course's solution
with those edits. kind "correct" = a correct submission in another reasonable style (must get full
marks); kind "cheat" = wins a check's letter without its behaviour (must lose it). RESULTS: what each
got when graded with tests/conftest.py's grade_batches (trained checks skipped).
Run: PYTHONPATH=. python tests/review23_attempts.py
"""
L, S = "02-layers", "03-sorting"

CLF_MASK = "        mask = padding_mask(tokens, self.pad_id)\n        for layer in self.layers:"
ENC_FWD = '''        x = self.norm1(x + self.dropout(self.self_attn(x, x, mask)))
        return self.norm2(x + self.dropout(self.ffn(x)))'''
DEC_FWD = '''        y = self.norm1(y + self.dropout(self.self_attn(y, y, self_mask)))
        y = self.norm2(y + self.dropout(self.cross_attn(y, memory, memory_mask)))
        return self.norm3(y + self.dropout(self.ffn(y)))'''
GREEDY_LOOP = '''    out = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    for _ in range(length):
        logits = model.decode(out, memory)[:, -1]
        logits[:, bos] = float("-inf")
        out = torch.cat([out, logits.argmax(dim=-1, keepdim=True)], dim=1)
    return out[:, 1:]'''
DECODE_MASK = "        mask = causal_mask(tgt_in.shape[1]).to(tgt_in.device)"

ATTEMPTS = {
    # -- correct styles, 02-layers ---------------------------------------------------------------
    "clf_mask_not_ne": (L, "correct", {"classifier-code": [(CLF_MASK, CLF_MASK.replace(
        "padding_mask(tokens, self.pad_id)",
        "~(tokens != self.pad_id).unsqueeze(1).unsqueeze(2)"))]}),
    "clf_mask_b1tt": (L, "correct", {"classifier-code": [(CLF_MASK, CLF_MASK.replace(
        "padding_mask(tokens, self.pad_id)",
        "(tokens == self.pad_id)[:, None, None, :].expand(-1, 1, T, T)"))]}),
    "clf_layer_mask_kw": (L, "correct", {"classifier-code": [(
        "x = layer(x, mask)", "x = layer(x, mask=mask)")]}),
    "reg_mask_eq": (L, "correct", {"regressor-code": [(CLF_MASK, CLF_MASK.replace(
        "padding_mask(tokens, self.pad_id)", "tokens.eq(self.pad_id).view(tokens.shape[0], 1, 1, T)"
    ))]}),
    "enc_F_dropout": (L, "correct", {"encoder-code": [
        ("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
        (ENC_FWD, '''        a = F.dropout(self.self_attn(x, x, mask), self.p, self.training)
        x = self.norm1(x + a)
        return self.norm2(x + F.dropout(self.ffn(x), self.p, self.training))''')]}),
    "enc_two_dropouts": (L, "correct", {"encoder-code": [
        ("self.dropout = nn.Dropout(dropout)",
         "self.dropout1 = nn.Dropout(dropout)\n        self.dropout2 = nn.Dropout(dropout)"),
        (ENC_FWD, '''        x = self.norm1(x + self.dropout1(self.self_attn(x, x, mask)))
        return self.norm2(x + self.dropout2(self.ffn(x)))''')]}),
    "dec_cross_kwargs": (L, "correct", {"decoder-code": [(
        "self.cross_attn(y, memory, memory_mask)",
        "self.cross_attn(x_q=y, x_kv=memory, mask=memory_mask)")]}),
    "dec_F_dropout": (L, "correct", {"decoder-code": [
        ("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
        (DEC_FWD, '''        drop = lambda t: F.dropout(t, self.p, self.training)
        y = self.norm1(y + drop(self.self_attn(y, y, self_mask)))
        y = self.norm2(y + drop(self.cross_attn(y, memory, memory_mask)))
        return self.norm3(y + drop(self.ffn(y)))''')]}),
    "pe_exp_log": (L, "correct", {"positions-code": [(
        "rate = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)",
        "rate = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))")]}),
    # -- correct styles, 03-sorting --------------------------------------------------------------
    "greedy_buffer_slice": (S, "correct", {"greedy-code": [(GREEDY_LOOP, '''    B = src.shape[0]
    ys = torch.full((B, length + 1), bos, dtype=torch.long, device=src.device)
    for t in range(length):
        logits = model.decode(ys[:, :t + 1], memory)[:, -1]
        logits[:, bos] = float("-inf")
        ys[:, t + 1] = logits.argmax(dim=-1)
    return ys[:, 1:]''')]}),
    "greedy_zero_buffer": (S, "correct", {"greedy-code": [(GREEDY_LOOP, '''    B = src.shape[0]
    ys = torch.zeros(B, length + 1, dtype=torch.long, device=src.device)
    ys[:, 0] = bos
    for t in range(1, length + 1):
        logits = model.decode(ys[:, :t], memory)[:, -1].clone()
        logits[:, bos] = float("-inf")
        ys[:, t] = logits.argmax(-1)
    return ys[:, 1:]''')]}),
    "greedy_eval_no_grad_block": (S, "correct", {"greedy-code": [
        ("@torch.no_grad()\n", ""),
        ("    memory = model.encode(src)\n", "    was = model.training\n    model.eval()\n"
         "    with torch.no_grad():\n        memory = model.encode(src)\n"),
        (GREEDY_LOOP, '''        out = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
        for _ in range(length):
            logits = model.decode(out, memory)[:, -1]
            logits[:, bos] = float("-inf")
            out = torch.cat([out, logits.argmax(dim=-1, keepdim=True)], dim=1)
    model.train(was)
    return out[:, 1:]''')]}),
    "greedy_int32": (S, "correct", {"greedy-code": [
        ("dtype=torch.long, device", "dtype=torch.int32, device"),
        ("logits.argmax(dim=-1, keepdim=True)", "logits.argmax(dim=-1, keepdim=True).int()")]}),
    "greedy_src_dtype": (S, "correct", {"greedy-code": [
        ("dtype=torch.long, device", "dtype=src.dtype, device"),
        ("logits.argmax(dim=-1, keepdim=True)", "logits.argmax(dim=-1, keepdim=True).to(src.dtype)"
         )]}),
    "greedy_list_stack": (S, "correct", {"greedy-code": [(GREEDY_LOOP, '''    tokens = [torch.full((src.shape[0],), bos, dtype=torch.long, device=src.device)]
    for _ in range(length):
        logits = model.decode(torch.stack(tokens, dim=1), memory, None)[:, -1, :]
        logits = logits.masked_fill(torch.arange(logits.shape[-1]) == bos, float("-inf"))
        tokens.append(logits.argmax(-1))
    return torch.stack(tokens[1:], dim=1)''')]}),
    "model_causal_buffer": (S, "correct", {"model-code": [
        ("        self.dropout = nn.Dropout(dropout)\n",
         "        self.dropout = nn.Dropout(dropout)\n"
         "        self.register_buffer(\"causal\", causal_mask(max_len), persistent=False)\n"),
        (DECODE_MASK, "        T = tgt_in.shape[1]\n        mask = self.causal[:T, :T]")]}),
    "model_triu_mask_kwargs": (S, "correct", {"model-code": [
        (DECODE_MASK, "        T = tgt_in.shape[1]\n        mask = torch.triu(torch.ones(T, T, "
         "device=tgt_in.device), diagonal=1).bool()"),
        ("y = layer(y, memory, mask, memory_mask)",
         "y = layer(y, memory, self_mask=mask, memory_mask=memory_mask)")]}),
    "model_forward_kwargs": (S, "correct", {"model-code": [(
        "return self.decode(tgt_in, self.encode(src))",
        "memory = self.encode(src, src_mask=None)\n"
        "        return self.decode(tgt_in=tgt_in, memory=memory, memory_mask=None)")]}),
    "teacher_fpad": (S, "correct", {"teacher-code": [(
        "    start = torch.full_like(y[:, :1], bos)\n    return torch.cat([start, y[:, :-1]], dim=1)",
        "    return F.pad(y[:, :-1], (1, 0), value=bos)")]}),
    "teacher_roll": (S, "correct", {"teacher-code": [(
        "    start = torch.full_like(y[:, :1], bos)\n    return torch.cat([start, y[:, :-1]], dim=1)",
        "    out = y.roll(1, dims=1).clone()\n    out[:, 0] = bos\n    return out")]}),
    "teacher_new_full": (S, "correct", {"teacher-code": [(
        "    start = torch.full_like(y[:, :1], bos)\n    return torch.cat([start, y[:, :-1]], dim=1)",
        "    out = y.new_full(y.shape, bos)\n    out[:, 1:] = y[:, :-1]\n    return out")]}),
    # -- cheats ----------------------------------------------------------------------------------
    "cheat_greedy_first_row": (S, "cheat", {"greedy-code": [(
        "out = torch.cat([out, logits.argmax(dim=-1, keepdim=True)], dim=1)",
        "out = torch.cat([out, logits[:1].argmax(dim=-1, keepdim=True).expand(len(out), 1)], 1)"
    )]}),
    "cheat_greedy_last_copy": (S, "cheat", {"greedy-code": [(
        "    return out[:, 1:]",
        "    out[:, -1] = out[:, -2] if length > 1 else out[:, -1]\n    return out[:, 1:]")]}),
    "cheat_greedy_src_last": (S, "cheat", {"greedy-code": [(
        "    return out[:, 1:]", "    out[:, -1] = src.max(dim=1).values\n    return out[:, 1:]")]}),
    "cheat_dropout_unscaled": (L, "cheat", {"encoder-code": [
        ("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
        (ENC_FWD, '''        keep = lambda t: t * (torch.rand_like(t) >= self.p) if self.training else t
        x = self.norm1(x + keep(self.self_attn(x, x, mask)))
        return self.norm2(x + keep(self.ffn(x)))''')]}),
    "cheat_dropout_shared_positions": (L, "cheat", {"encoder-code": [
        ("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
        (ENC_FWD, '''        def keep(t):
            if not self.training:
                return t
            m = (torch.rand_like(t[:, :1]) >= self.p) / (1 - self.p)
            return t * m
        x = self.norm1(x + keep(self.self_attn(x, x, mask)))
        return self.norm2(x + keep(self.ffn(x)))''')]}),
    "cheat_pad_id_3": (L, "cheat", {"classifier-code": [
        ("mask = padding_mask(tokens, self.pad_id)", "mask = padding_mask(tokens, 3)"),
        ("real = (tokens != self.pad_id)", "real = (tokens != 3)")]}),
    "cheat_dec_memory_mean": (L, "cheat", {"decoder-code": [(
        "self.cross_attn(y, memory, memory_mask)",
        "self.cross_attn(y, memory.mean(1, keepdim=True).expand_as(memory), memory_mask)")]}),
    "cheat_teacher_float": (S, "cheat", {"teacher-code": [(
        "    start = torch.full_like(y[:, :1], bos)",
        "    y = y.float()\n    start = torch.full_like(y[:, :1], bos)")]}),
}

ATTEMPTS.update({
    # -- second round: correct styles -------------------------------------------------------------
    "greedy_fixed_shape": (S, "correct", {"greedy-code": [(GREEDY_LOOP, '''    B = src.shape[0]
    ys = torch.full((B, length + 1), bos, dtype=torch.long, device=src.device)
    for t in range(length):
        logits = model.decode(ys, memory)[:, t]      # the causal mask hides positions after t
        logits[:, bos] = float("-inf")
        ys[:, t + 1] = logits.argmax(dim=-1)
    return ys[:, 1:]''')]}),
    "greedy_inference_mode": (S, "correct", {"greedy-code": [
        ("@torch.no_grad()\n", "@torch.inference_mode()\n")]}),
    "greedy_plain_grad": (S, "correct", {"greedy-code": [
        ("@torch.no_grad()\n", ""),
        ("logits = model.decode(out, memory)[:, -1]",
         "logits = model.decode(out, memory)[:, -1].detach().clone()")]}),
    "greedy_max_indices": (S, "correct", {"greedy-code": [
        ('logits[:, bos] = float("-inf")',
         'logits = logits.index_fill(1, torch.tensor([bos]), float("-inf"))'),
        ("logits.argmax(dim=-1, keepdim=True)", "torch.max(logits, dim=-1)[1][:, None]")]}),
    "enc_inplace_dropout": (L, "correct", {"encoder-code": [
        ("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(dropout, inplace=True)")
    ]}),
    "dec_inplace_dropout": (L, "correct", {"decoder-code": [
        ("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(dropout, inplace=True)")
    ]}),
    "model_mask_4d": (S, "correct", {"model-code": [(DECODE_MASK,
        "        mask = causal_mask(tgt_in.shape[1]).to(tgt_in.device)[None, None]")]}),
    "model_embed_F_dropout": (S, "correct", {"model-code": [
        ("        return self.dropout(x)",
         "        return F.dropout(x, self.dropout.p, self.training)")]}),
    "greedy_src_long": (S, "correct", {"greedy-code": [
        ("    memory = model.encode(src)", "    src = src.long()\n    memory = model.encode(src)")]}),
    "clf_mask_expand_heads": (L, "correct", {"classifier-code": [(CLF_MASK, CLF_MASK.replace(
        "padding_mask(tokens, self.pad_id)",
        "padding_mask(tokens, self.pad_id).expand(-1, self.layers[0].self_attn.num_heads, T, -1)"
    ))]}),
    # -- second round: cheats --------------------------------------------------------------------
    "cheat_dropout_fixed_seed": (L, "cheat", {"encoder-code": [(
        "    def forward(self, x, mask=None):\n",
        "    def forward(self, x, mask=None):\n        torch.manual_seed(0)\n")]}),
    "cheat_dropout_eval_too": (L, "cheat", {"encoder-code": [
        ("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
        (ENC_FWD, '''        drop = lambda t: F.dropout(t, self.p, True)
        x = self.norm1(x + drop(self.self_attn(x, x, mask)))
        return self.norm2(x + drop(self.ffn(x)))''')]}),
    "cheat_greedy_one_shot": (S, "cheat", {"greedy-code": [(GREEDY_LOOP,
        '''    logits = model.decode(torch.full((src.shape[0], length), bos, dtype=torch.long,
                                     device=src.device), memory)
    logits[..., bos] = float("-inf")
    return logits.argmax(-1)''')]}),
})

ATTEMPTS.update({
    # -- third round: correct styles --------------------------------------------------------------
    "greedy_per_row": (S, "correct", {"greedy-code": [
        ("    memory = model.encode(src)\n", ""),
        (GREEDY_LOOP, '''    rows = []
    for i in range(src.shape[0]):
        memory = model.encode(src[i:i + 1])
        out = torch.full((1, 1), bos, dtype=torch.long, device=src.device)
        for _ in range(length):
            logits = model.decode(out, memory)[:, -1]
            logits[:, bos] = float("-inf")
            out = torch.cat([out, logits.argmax(dim=-1, keepdim=True)], dim=1)
        rows.append(out[0, 1:])
    return torch.stack(rows)''')]}),
    "greedy_decode_kw": (S, "correct", {"greedy-code": [(
        "model.decode(out, memory)", "model.decode(tgt_in=out, memory=memory, memory_mask=None)")]}),
    "enc_attn_kwargs": (L, "correct", {"encoder-code": [(
        "self.self_attn(x, x, mask)", "self.self_attn(x_q=x, x_kv=x, mask=mask)")]}),
    "dec_three_dropouts": (L, "correct", {"decoder-code": [
        ("self.dropout = nn.Dropout(dropout)", "self.drop1, self.drop2, self.drop3 = "
         "nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)"),
        (DEC_FWD, '''        y = self.norm1(y + self.drop1(self.self_attn(y, y, mask=self_mask)))
        y = self.norm2(y + self.drop2(self.cross_attn(y, memory, mask=memory_mask)))
        return self.norm3(y + self.drop3(self.ffn(y)))''')]}),
    "clf_masked_fill_pool": (L, "correct", {"classifier-code": [(
        "        real = (tokens != self.pad_id).unsqueeze(-1).float()\n"
        "        pooled = (x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1)",
        "        pad = (tokens == self.pad_id).unsqueeze(-1)\n"
        "        pooled = x.masked_fill(pad, 0.0).sum(1) / (~pad).sum(1).clamp(min=1)")]}),
    # -- third round: cheats -----------------------------------------------------------------------
    "cheat_greedy_memory_row0": (S, "cheat", {"greedy-code": [(
        "    memory = model.encode(src)",
        "    memory = model.encode(src)[:1].expand(src.shape[0], -1, -1)")]}),
    "cheat_enc_dropout_ffn_only": (L, "cheat", {"encoder-code": [(
        "x = self.norm1(x + self.dropout(self.self_attn(x, x, mask)))",
        "x = self.norm1(x + self.self_attn(x, x, mask))")]}),
    "cheat_clf_pool_only_mask": (L, "cheat", {"classifier-code": [(
        "mask = padding_mask(tokens, self.pad_id)", "mask = None")]}),
})

ATTEMPTS.update({
    # -- fourth round ------------------------------------------------------------------------------
    "greedy_neg_large": (S, "correct", {"greedy-code": [(
        'logits[:, bos] = float("-inf")', "logits[:, bos] = -1e9")]}),
    "model_square_subsequent": (S, "rule", {"model-code": [(DECODE_MASK,
        "        mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1]) != 0")]}),
    "model_tril_eq0": (S, "correct", {"model-code": [(DECODE_MASK,
        "        T = tgt_in.shape[1]\n        mask = torch.tril(torch.ones(T, T, device=tgt_in.device))"
        " == 0")]}),
})

RESULTS = {   # graded 2026-12-02 15:44-15:50 UTC, trained checks skipped; lost -> first message
    'clf_mask_not_ne': {'lost': [],
    },
    'clf_mask_b1tt': {'lost': [],
    },
    'clf_layer_mask_kw': {'lost': [],
    },
    'reg_mask_eq': {'lost': [],
    },
    'enc_F_dropout': {'lost': [],
    },
    'enc_two_dropouts': {'lost': [],
    },
    'dec_cross_kwargs': {'lost': [],
    },
    'dec_F_dropout': {'lost': [],
    },
    'pe_exp_log': {'lost': [],
    },
    'greedy_buffer_slice': {'lost': [],
    },
    'greedy_zero_buffer': {'lost': [],
    },
    'greedy_eval_no_grad_block': {'lost': [],
    },
    'greedy_int32': {'lost': [],
    },
    'greedy_src_dtype': {'lost': [],
    },
    'greedy_list_stack': {'lost': [],
    },
    'model_causal_buffer': {'lost': [],
    },
    'model_triu_mask_kwargs': {'lost': [],
    },
    'model_forward_kwargs': {'lost': [],
    },
    'teacher_fpad': {'lost': [],
    },
    'teacher_roll': {'lost': [],
    },
    'teacher_new_full': {'lost': [],
    },
    'cheat_greedy_first_row': {'lost': ['greedy.encoder_once', 'greedy.last_position', 'greedy.length', 'greedy.no_bos', 'greedy.reference'],
        'messages': {'greedy.no_bos': 'greedy_decode should pick the most likely token other than BOS', 'greedy.last_position': 'greedy_decode wrote the same tokens for every source: the tokens must come from model.decode, with the memory that model.encode gives for src', 'greedy.encoder_once': 'decode call 2 got tgt_in [10, 3] (first row) instead of BOS and the tokens chosen so far, [10, 3]: each step decodes the previous input with the argmax of its l', 'greedy.reference': 'greedy_decode differs from the expected output on 15 of 16 sequences: take the argmax (no sampling) of the last position at every step, appending each choice to', 'greedy.length': 'greedy_decode with length=5 should return the 5 tokens written, without BOS'},
        'note': "defended; greedy.no_bos's message talks of BOS, which is not the cause",
    },
    'cheat_greedy_last_copy': {'lost': ['greedy.encoder_once', 'greedy.last_position', 'greedy.length', 'greedy.no_bos', 'greedy.reference'],
        'messages': {'greedy.no_bos': 'greedy_decode should pick the most likely token other than BOS', 'greedy.last_position': 'on a model whose next token is the last token plus 3, greedy_decode wrote [6, 9, 2, 5, 8, 1, 1] instead of [6, 9, 2, 5, 8, 1, 4]: read the logits of the last po', 'greedy.encoder_once': 'greedy_decode did not return the tokens its decoding chose: return the argmax of each step, in order, without BOS', 'greedy.reference': 'greedy_decode differs from the expected output on 1 of 16 sequences: take the argmax (no sampling) of the last position at every step, appending each choice to ', 'greedy.length': 'greedy_decode with length=5 should return the 5 tokens written, without BOS'},
    },
    'cheat_greedy_src_last': {'lost': ['greedy.encoder_once', 'greedy.last_position', 'greedy.length', 'greedy.no_bos', 'greedy.reference'],
        'messages': {'greedy.no_bos': 'greedy_decode should pick the most likely token other than BOS', 'greedy.last_position': 'on a model whose next token is the last token plus 3, greedy_decode wrote [6, 9, 2, 5, 8, 1, 9] instead of [6, 9, 2, 5, 8, 1, 4]: read the logits of the last po', 'greedy.encoder_once': 'greedy_decode did not return the tokens its decoding chose: return the argmax of each step, in order, without BOS', 'greedy.reference': 'greedy_decode differs from the expected output on 14 of 16 sequences: take the argmax (no sampling) of the last position at every step, appending each choice to', 'greedy.length': 'greedy_decode with length=5 should return the 5 tokens written, without BOS'},
    },
    'cheat_dropout_unscaled': {'lost': ['encoder.dropout'],
        'messages': {'encoder.dropout': 'in training mode, at the self-attention sublayer: dropout does not scale the values it keeps by 1/(1-p)'},
    },
    'cheat_dropout_shared_positions': {'lost': ['encoder.dropout'],
        'messages': {'encoder.dropout': 'in training mode, at the self-attention sublayer, dropout zeroed the same features at every position of a sequence, or in every sequence of the batch: dropout d'},
    },
    'cheat_pad_id_3': {'lost': ['classifier.values'],
        'messages': {'classifier.values': "EncoderClassifier built with the signature's defaults, on tokens [2, 64] padded with 0 (eval mode): not the expected values (largest difference 1.2): keep the d"},
    },
    'cheat_dec_memory_mean': {'lost': ['decoder.masks', 'decoder.values'],
        'messages': {'decoder.values': 'DecoderLayer on y [2, 5, 12], memory [2, 7, 12] (eval mode): not the expected values (largest difference 0.66)', 'decoder.masks': 'changing masked memory positions changed the output: cross-attention must get memory_mask (the mask was passed on, but something else mixes the positions)'},
    },
    'cheat_teacher_float': {'lost': ['teacher.shift'],
        'messages': {'teacher.shift': 'shift_right(y [3, 6], bos) should be an integer tensor (token ids), not float32'},
    },
    'greedy_fixed_shape': {'lost': ['greedy.encoder_once'],
        'messages': {'greedy.encoder_once': 'decode call 1 got tgt_in [10, 10, 10, 10, 10, 10, 10, 10, 10] (first row) instead of BOS and the tokens chosen so far, [10]: each step decodes the previous inpu'},
        'note': "WRONGLY LOST (debatable): same output as the solution (causal mask), encodes once, but decodes the whole fixed buffer and reads position t; encoder_once's input-extension rule fails it with a message about tgt_in, not about encoding",
        'after': "fixed: a decode call's input must start with BOS and the tokens chosen so far (later "
                 "positions may hold anything); full marks, alternatives.FIXED_SHAPE_GREEDY",
    },
    'greedy_inference_mode': {'lost': [],
    },
    'greedy_plain_grad': {'lost': [],
    },
    'greedy_max_indices': {'lost': [],
    },
    'enc_inplace_dropout': {'lost': [],
    },
    'dec_inplace_dropout': {'lost': [],
    },
    'model_mask_4d': {'lost': [],
    },
    'model_embed_F_dropout': {'lost': [],
    },
    'greedy_src_long': {'lost': [],
    },
    'clf_mask_expand_heads': {'lost': [],
    },
    'cheat_dropout_fixed_seed': {'lost': ['encoder.dropout'],
        'messages': {'encoder.dropout': 'in training mode, two calls with different random seeds gave the same output: dropout must draw a new random keep-mask at each call (nn.Dropout, or F.dropout wi'},
    },
    'cheat_dropout_eval_too': {'lost': ['encoder.dropout', 'encoder.mask', 'encoder.values'],
        'messages': {'encoder.values': 'in eval mode the layer gives different outputs for the same input: dropout must be off in eval mode (use nn.Dropout, or F.dropout with training=self.training)', 'encoder.mask': 'in eval mode the layer gives different outputs for the same input: dropout must be off in eval mode (use nn.Dropout, or F.dropout with training=self.training)', 'encoder.dropout': 'in eval mode the layer gives different outputs for the same input: dropout must be off in eval mode (use nn.Dropout, or F.dropout with training=self.training)'},
    },
    'cheat_greedy_one_shot': {'lost': ['greedy.encoder_once', 'greedy.last_position', 'greedy.length', 'greedy.no_bos', 'greedy.reference'],
        'messages': {'greedy.no_bos': 'greedy_decode should pick the most likely token other than BOS', 'greedy.last_position': 'on a model whose next token is the last token plus 3, greedy_decode wrote [6, 6, 6, 6, 6, 6, 6] instead of [6, 9, 2, 5, 8, 1, 4]: read the logits of the last po', 'greedy.encoder_once': 'greedy_decode called model.decode 1 times to write 8 tokens: decode once per token written, with the tokens chosen so far', 'greedy.reference': 'greedy_decode differs from the expected output on 6 of 16 sequences: take the argmax (no sampling) of the last position at every step, appending each choice to ', 'greedy.length': 'greedy_decode with length=5 should return the 5 tokens written, without BOS'},
    },
    'greedy_per_row': {'lost': ['greedy.encoder_once'],
        'messages': {'greedy.encoder_once': 'greedy_decode ran the encoder 3 times for one call: run model.encode once and reuse the memory'},
        'note': "lost, debatable: encodes each source separately (B encode calls); the docstring says 'Encodes src once'",
    },
    'greedy_decode_kw': {'lost': [],
    },
    'enc_attn_kwargs': {'lost': [],
    },
    'dec_three_dropouts': {'lost': [],
    },
    'clf_masked_fill_pool': {'lost': [],
    },
    'cheat_greedy_memory_row0': {'lost': ['greedy.last_position', 'greedy.length', 'greedy.no_bos', 'greedy.reference'],
        'messages': {'greedy.no_bos': 'greedy_decode should pick the most likely token other than BOS', 'greedy.last_position': 'greedy_decode wrote the same tokens for every source: the tokens must come from model.decode, with the memory that model.encode gives for src', 'greedy.reference': 'greedy_decode differs from the expected output on 15 of 16 sequences: take the argmax (no sampling) of the last position at every step, appending each choice to', 'greedy.length': 'greedy_decode with length=5 should return the 5 tokens written, without BOS'},
    },
    'cheat_enc_dropout_ffn_only': {'lost': ['encoder.dropout'],
        'messages': {'encoder.dropout': 'in training mode, at the self-attention sublayer: dropout does not scale the values it keeps by 1/(1-p)'},
        'note': 'defended, but the message blames 1/(1-p) scaling, not the missing dropout at the self-attention sublayer',
    },
    'cheat_clf_pool_only_mask': {'lost': ['classifier.padding', 'classifier.values'],
        'messages': {'classifier.padding': 'padding changed the prediction of a sequence: the encoder layers ran without the padding mask: pass padding_mask(tokens, pad_id) to every layer', 'classifier.values': 'EncoderClassifier on tokens [3, 7] with padding (eval mode): not the expected values (largest difference 0.021): the encoder layers ran without the padding mask'},
    },
    'greedy_neg_large': {'lost': [],
    },
    'model_square_subsequent': {'lost': ['model.causal', 'model.embed', 'model.padding', 'model.params', 'model.tied', 'model.values'],
        'messages': {'model.params': "Transformer uses torch.nn.Transformer (cell model-code, line 35), torch's ready-made attention; the course's rules do not allow this here, so write the attentio", 'model.tied': "Transformer uses torch.nn.Transformer (cell model-code, line 35), torch's ready-made attention; the course's rules do not allow this here, so write the attentio", 'model.embed': "Transformer uses torch.nn.Transformer (cell model-code, line 35), torch's ready-made attention; the course's rules do not allow this here, so write the attentio", 'model.values': "Transformer uses torch.nn.Transformer (cell model-code, line 35), torch's ready-made attention; the course's rules do not allow this here, so write the attentio", 'model.causal': "Transformer uses torch.nn.Transformer (cell model-code, line 35), torch's ready-made attention; the course's rules do not allow this here, so write the attentio", 'model.padding': "Transformer uses torch.nn.Transformer (cell model-code, line 35), torch's ready-made attention; the course's rules do not allow this here, so write the attentio"},
        'note': "lost by the course's rule (torch.nn.Transformer named), not by issue 23",
    },
    'model_tril_eq0': {'lost': [],
    },
}

if __name__ == "__main__":
    import json
    import sys
    from dataclasses import dataclass
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import ROOT, grade_batches, lost_points, make_submission, replace_in, \
        solution_cells
    from tfcourse.course import load_course

    @dataclass
    class Item:
        name: str
        assignment: str
        edits: dict
        train: bool = False

    def build(folder, item):
        answers = dict(solution_cells(item.assignment))
        for cell, edits in item.edits.items():
            for old, new in edits:
                answers[cell] = replace_in(answers[cell], old, new)
        return make_submission(folder, item.assignment, answers=answers)

    only = sys.argv[2:] if len(sys.argv) > 2 else list(ATTEMPTS)
    items = [Item(n, ATTEMPTS[n][0], ATTEMPTS[n][2]) for n in only]
    out = grade_batches(load_course(ROOT), items, Path(sys.argv[1]), build,
                        untrained=("trained.accuracy", "regressor.trained"))
    got = {}
    for name, (results, skipped) in out.items():
        lost = sorted(lost_points(results, skipped))
        msgs = {t["number"]: t["output"][:300] for t in results["tests"] if t["number"] in lost}
        got[name] = {"kind": ATTEMPTS[name][1], "lost": lost, "messages": msgs}
    print(json.dumps(got, indent=1))
