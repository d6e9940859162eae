"""The fine-tuning cases of issue 14, in one place: LoRA and DoRA adapters on
three decoder families and one encoder, CNNs with a frozen backbone, a
Llama-3-8B-shaped model with LoRA in bf16 (with and without gradient
checkpointing), Adafactor, and gradient accumulation.

A *model* is one distinct graph (a base network and its adapters); export_finetune.py
exports each once. A *case* is what measure_finetune.py measures at each
(batch, seq) and compare_finetune.py hands to memest: a model, the dtype of
its weights, the optimizer, gradient accumulation, checkpointing, and the
trainable-parameter pattern memest is given (`--trainable`).

Every model is built from a config with random init (no downloads), on the CPU
by default; build(model_id, device="meta") builds any of them without
materialising weights, and build(model_id, device="cuda", dtype=torch.bfloat16)
is how measure_finetune.py makes the 8B model directly on the GPU.
tiny=True swaps in small dims of the same structure for --cpu-selftest.

Decoders return logits (a CausalLM wrapped so that forward(input_ids) returns
.logits), BERT returns last_hidden_state, resnet50 its logits. Parameter names
are those of the wrapper: m.base_model.model.... for a peft model, so the
pattern "lora_" names exactly the adapter weights (lora_A, lora_B and DoRA's
lora_magnitude_vector).
"""
import fnmatch

import torch
from torch import nn

from zoo import LastHidden  # the accuracy zoo's wrapper: the same module names (m.)

# ---- base networks ---------------------------------------------------------------------------

DECODER_SEQS = (256, 1024)
DECODER_BATCHES = (1, 4, 8)


class Logits(nn.Module):
    """A Hugging Face CausalLM that takes input_ids and returns logits."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids).logits


def _llama_s(tiny):
    from transformers import LlamaConfig, LlamaForCausalLM
    dims = (dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=1, vocab_size=320) if tiny else
            dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                 num_key_value_heads=4, vocab_size=32000))
    return Logits(LlamaForCausalLM(LlamaConfig(**dims, max_position_embeddings=2048, use_cache=False,
                                               attn_implementation="sdpa")))


def _llama8b(tiny):
    from transformers import LlamaConfig, LlamaForCausalLM
    dims = (dict(hidden_size=128, intermediate_size=448, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=1, vocab_size=1002) if tiny else
            dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=8, vocab_size=128256))
    return Logits(LlamaForCausalLM(LlamaConfig(**dims, rope_theta=500000.0, max_position_embeddings=8192,
                                               rms_norm_eps=1e-5, tie_word_embeddings=False, use_cache=False,
                                               attn_implementation="sdpa")))


def _gpt2(tiny):
    from transformers import GPT2Config, GPT2LMHeadModel
    dims = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=503) if tiny else dict(n_layer=6, n_embd=768, n_head=12)
    return Logits(GPT2LMHeadModel(GPT2Config(**dims, n_positions=1024, use_cache=False,
                                             attn_implementation="sdpa")))


def _qwen2(tiny):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    dims = (dict(hidden_size=64, intermediate_size=352, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=1519) if tiny else
            dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=6, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936))
    # Qwen2-0.5B's shape at 6 layers: tied embeddings, biases on q/k/v only
    return Logits(Qwen2ForCausalLM(Qwen2Config(**dims, max_position_embeddings=2048, tie_word_embeddings=True,
                                               use_cache=False, attn_implementation="sdpa")))


def _bert(tiny):
    from transformers import BertConfig, BertModel
    dims = (dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256, vocab_size=1000)
            if tiny else {})
    # no pooler: last_hidden_state does not use it, and its LoRA weights would get no gradient
    return LastHidden(BertModel(BertConfig(**dims, attn_implementation="sdpa", use_cache=False),
                                add_pooling_layer=False))


def _resnet50(tiny):
    """Bare (no wrapper), so that its names are torchvision's: fc.weight, layer4.0.conv1.weight."""
    import torchvision
    if tiny:
        return torchvision.models.resnet._resnet(torchvision.models.resnet.Bottleneck, [1, 1, 1, 1], None, False,
                                                 num_classes=10)
    return torchvision.models.resnet50(weights=None)


# family: builder, kind, vocab (full, tiny), attention targets, all-linear targets
FAMILIES = {
    "llama_s": dict(build=_llama_s, kind="tokens", vocab=(32000, 320),
                    attn=["q_proj", "k_proj", "v_proj", "o_proj"],
                    all=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
    "gpt2": dict(build=_gpt2, kind="tokens", vocab=(50257, 503),
                 # GPT-2's Conv1D projections; attn.c_proj, not mlp.c_proj (peft matches name suffixes)
                 attn=["attn.c_attn", "attn.c_proj"], all=["c_attn", "c_proj", "c_fc"]),
    "qwen2_s": dict(build=_qwen2, kind="tokens", vocab=(151936, 1519),
                    attn=["q_proj", "k_proj", "v_proj", "o_proj"],
                    all=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
    "bert": dict(build=_bert, kind="tokens", vocab=(30522, 1000),
                 attn=["query", "key", "value", "attention.output.dense"],
                 all=["query", "key", "value", "dense"]),
    "llama8b": dict(build=_llama8b, kind="tokens", vocab=(128256, 1002),
                    attn=["q_proj", "k_proj", "v_proj", "o_proj"]),
    "resnet50": dict(build=_resnet50, kind="image"),
}

# model id: (family, adapter or None). adapter: (targets "attn"|"all", r, dora)
MODELS = {}
for _fam in ("llama_s", "gpt2", "qwen2_s"):
    MODELS[f"{_fam}.full"] = (_fam, None)
    for _t in ("attn", "all"):
        for _r in (8, 64):
            MODELS[f"{_fam}.lora_{_t}_r{_r}"] = (_fam, (_t, _r, False))
    MODELS[f"{_fam}.dora_attn_r8"] = (_fam, ("attn", 8, True))
del MODELS["qwen2_s.full"]
MODELS["bert.lora_attn_r8"] = ("bert", ("attn", 8, False))
MODELS["bert.lora_all_r8"] = ("bert", ("all", 8, False))
MODELS["bert.lora_all_r64"] = ("bert", ("all", 64, False))
MODELS["resnet50"] = ("resnet50", None)
MODELS["llama8b.lora_attn_r16"] = ("llama8b", ("attn", 16, False))


def _case(model, cid=None, dtype="float32", optimizer="adamw", grad_accum=1, checkpoint=False, trainable=None,
          batches=DECODER_BATCHES, seqs=DECODER_SEQS, build_on_device=False, amp=None):
    """trainable: memest's --trainable PATTERN[,PATTERN...] (None: every parameter
    trains); for a peft model it must name exactly what peft left trainable
    (selftest checks). amp: "bf16" runs the forward pass and the loss under
    torch.autocast("cuda", dtype=torch.bfloat16), float32 weights."""
    fam, adapter = MODELS[model]
    if adapter and trainable is None:
        trainable = "lora_"
    return dict(id=cid or model, model=model, family=fam, adapter=adapter, dtype=dtype, optimizer=optimizer,
                grad_accum=grad_accum, checkpoint=checkpoint, trainable=trainable, batches=list(batches),
                seqs=list(seqs) if seqs else None, build_on_device=build_on_device, amp=amp)


def _cases():
    """In the order measure_finetune.py runs them: one case of each kind first
    (so that a run cut short by its time budget still covers every kind), the
    other adapter configurations next, the 8B last."""
    img = dict(batches=(8, 32), seqs=None)
    first = [_case("llama_s.lora_attn_r8"), _case("gpt2.lora_attn_r8"), _case("qwen2_s.lora_attn_r8"),
             _case("bert.lora_attn_r8", seqs=(256, 512)),  # BERT's 512 positions
             _case("resnet50", "resnet50.fc", trainable="fc.", **img),
             _case("resnet50", "resnet50.layer4_fc", trainable="layer4.,fc.", **img),
             _case("resnet50", "resnet50.full.adafactor", optimizer="adafactor", **img),
             _case("resnet50", "resnet50.full.accum4", grad_accum=4, **img),
             _case("llama_s.full", "llama_s.full.adafactor", optimizer="adafactor"),
             _case("gpt2.full", "gpt2.full.accum4", grad_accum=4),
             _case("llama_s.lora_attn_r8", "llama_s.lora_attn_r8.bf16", dtype="bfloat16"),
             _case("llama_s.dora_attn_r8"), _case("gpt2.dora_attn_r8"), _case("qwen2_s.dora_attn_r8"),
             _case("llama_s.dora_attn_r8", "llama_s.dora_attn_r8.bf16", dtype="bfloat16")]
    rest = []
    for fam in ("llama_s", "gpt2", "qwen2_s"):
        for t, r in (("attn", 64), ("all", 8), ("all", 64)):
            rest.append(_case(f"{fam}.lora_{t}_r{r}"))
    rest.append(_case("llama_s.lora_all_r64", "llama_s.lora_all_r64.bf16", dtype="bfloat16"))
    # autocast over float32 weights, frozen ones included
    rest += [_case("llama_s.lora_attn_r8", "llama_s.lora_attn_r8.amp_bf16", amp="bf16"),
             _case("gpt2.lora_attn_r8", "gpt2.lora_attn_r8.amp_bf16", amp="bf16"),
             _case("resnet50", "resnet50.layer4_fc.amp_bf16", trainable="layer4.,fc.", amp="bf16", **img)]
    rest += [_case(m, seqs=(256, 512)) for m in ("bert.lora_all_r8", "bert.lora_all_r64")]
    # last: the LLM-sized model, bf16 on the GPU, with and without checkpointing
    big = [_case("llama8b.lora_attn_r16", "llama8b.lora_attn_r16.bf16" + (".ckpt" if ck else ""), dtype="bfloat16",
                 checkpoint=ck, batches=(1, 2, 4, 8), seqs=(1024, 2048), build_on_device=True) for ck in (False, True)]
    return first + rest + big


CASES = _cases()
CASE = {c["id"]: c for c in CASES}
assert len(CASE) == len(CASES)


# ---- building --------------------------------------------------------------------------------

def adapter_config(fam, adapter):
    from peft import LoraConfig
    t, r, dora = adapter
    return LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(FAMILIES[fam][t]), lora_dropout=0.05,
                      use_dora=dora)


def build(model_id, device="cpu", dtype=torch.float32, tiny=False, checkpoint=False):
    """The nn.Module of MODELS[model_id], built with seed 0 under
    torch.device(device) with default dtype `dtype`; peft adapters keep that dtype
    (autocast_adapter_dtype=False). checkpoint: Hugging Face gradient
    checkpointing (use_reentrant=False) of every decoder layer, enabled on the
    base model before peft wraps it."""
    fam, adapter = MODELS[model_id]
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            m = FAMILIES[fam]["build"](tiny)
            if checkpoint:
                m.m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if adapter:
                from peft import get_peft_model
                m.m = get_peft_model(m.m, adapter_config(fam, adapter), autocast_adapter_dtype=False)
    finally:
        torch.set_default_dtype(prev)
    return m


def checkpointed_modules(model):
    """Names of the modules that Hugging Face runs under torch.utils.checkpoint
    (GradientCheckpointingLayer instances with gradient_checkpointing set)."""
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:
        GradientCheckpointingLayer = nn.Module
    return [n for n, mod in model.named_modules()
            if isinstance(mod, GradientCheckpointingLayer) and getattr(mod, "gradient_checkpointing", False)]


def set_trainable(model, case):
    """For a model without adapters, make trainable exactly what case["trainable"]
    names (None: everything). peft models are left as peft made them."""
    if case["adapter"]:
        return
    for n, p in model.named_parameters():
        p.requires_grad_(matches(case["trainable"], n))


def matches(pattern, name):
    """memest's --trainable: comma-separated patterns; one without * ? [ matches a
    name that contains it, one with them is a glob on the whole name."""
    if pattern is None:
        return True
    for pat in pattern.split(","):
        if any(ch in pat for ch in "*?["):
            if fnmatch.fnmatchcase(name, pat):
                return True
        elif pat in name:
            return True
    return False


def vocab(case_or_model, tiny=False):
    fam = MODELS[case_or_model][0] if case_or_model in MODELS else CASE[case_or_model]["family"]
    return FAMILIES[fam]["vocab"][1 if tiny else 0]


def make_input(model_id, batch, seq=None, tiny=False, device="cpu"):
    """input_ids (batch, seq) for a token model, a (batch, 3, 224, 224) image
    (64x64 when tiny) for resnet50; seed 1."""
    fam = MODELS[model_id][0]
    g = torch.Generator().manual_seed(1)
    if FAMILIES[fam]["kind"] == "image":
        side = 64 if tiny else 224
        return torch.randn(batch, 3, side, side, generator=g).to(device)
    return torch.randint(0, FAMILIES[fam]["vocab"][1 if tiny else 0], (batch, seq), generator=g).to(device)


def input_name(model_id):
    return "input" if FAMILIES[MODELS[model_id][0]]["kind"] == "image" else "input_ids"


def make_optimizer(case, params):
    if case["optimizer"] == "adafactor":
        return torch.optim.Adafactor(params)
    return torch.optim.AdamW(params, lr=1e-4)


def memest_args(case, batch, seq):
    """memest's flags for one row of the case (without the model path and --format)."""
    a = ["--batch", str(batch)]
    if seq is not None:
        a += ["--dim", f"seq={seq}"]
    a += ["--optimizer", case["optimizer"]]
    if case["trainable"]:
        a += ["--trainable", case["trainable"]]
    if case["dtype"] != "float32":
        a += ["--dtype", case["dtype"]]
    if case["grad_accum"] > 1:
        a += ["--grad-accum", str(case["grad_accum"])]
    if case.get("amp"):
        a += ["--amp", case["amp"]]
    if case["checkpoint"]:
        a += ["--checkpoint", "every=1"]
    return a


def export_name(model_id, dtype="float32"):
    """The export's file stem: the model id, with ".bf16" for a model built in
    bfloat16 (its graph differs: it casts to float32 where the model upcasts,
    RMSNorm's hidden_states.to(torch.float32))."""
    return model_id if dtype == "float32" else f"{model_id}.{DTYPE_SUFFIX[dtype]}"


DTYPE_SUFFIX = {"bfloat16": "bf16"}
TORCH_DTYPE = {"float32": torch.float32, "bfloat16": torch.bfloat16}
