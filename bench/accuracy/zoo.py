"""The models the accuracy harness exports and measures.

The first six are the models of ../shared/truth (same definitions, so the
harness reproduces that truth); the rest are models memest was never tuned on.
Each entry: build() -> nn.Module, make_input(batch) -> tensor, the batches.
Nothing here needs a GPU: export.py runs it on a CPU, measure.py on a GPU.
"""
import torch
from torch import nn
import torch.nn.functional as F

IMAGE = (3, 224, 224)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 6, 5, padding=2)
        self.c2 = nn.Conv2d(6, 16, 5)
        self.f1 = nn.Linear(400, 120)
        self.f2 = nn.Linear(120, 84)
        self.f3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = torch.flatten(x, 1)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x)))))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                 nn.Dropout(0.1), nn.Linear(1024, 10))

    def forward(self, x):
        return self.net(x)


class LastHidden(nn.Module):
    """A Hugging Face model that takes input_ids and returns last_hidden_state."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids).last_hidden_state


class ConvNet1d(nn.Module):
    """A 1-D CNN over sequences: Conv1d, BatchNorm1d, GELU, AvgPool, LayerNorm."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(16, 64, 7, padding=3), nn.BatchNorm1d(64), nn.GELU(), nn.AvgPool1d(2),
            nn.Conv1d(64, 128, 5, padding=2), nn.BatchNorm1d(128), nn.GELU(), nn.AvgPool1d(2),
            nn.Conv1d(128, 256, 3, padding=1), nn.BatchNorm1d(256), nn.GELU())
        self.norm = nn.LayerNorm(256)
        self.head = nn.Linear(256, 32)

    def forward(self, x):
        h = self.body(x).mean(dim=2)
        return self.head(self.norm(h))


class MixerMLP(nn.Module):
    """Token MLP blocks: LayerNorm, Linear, GELU, Dropout, residuals, Softmax head."""

    def __init__(self, dim=512, tokens=64, depth=4):
        super().__init__()
        self.embed = nn.Linear(48, dim)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Dropout(0.1),
                          nn.Linear(4 * dim, dim)) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 100)

    def forward(self, x):
        h = self.embed(x)
        for b in self.blocks:
            h = h + b(h)
        return torch.softmax(self.head(self.norm(h).mean(dim=1)), dim=-1)


class CifarResNet(nn.Module):
    """ResNet-20 for 32x32 images (He et al. 2016, section 4.2): 16, 32 and 64
    channels, three basic blocks a stage, strided 3x3 convs, 1x1 shortcuts."""

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.short = (nn.Sequential() if stride == 1 and cin == cout else
                          nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

        def forward(self, x):
            return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.short(x))

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        layers, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                layers.append(CifarResNet.Block(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.layers(self.stem(x)).mean(dim=(2, 3)))


class CifarVGG(nn.Module):
    """A small VGG for 32x32 images: 32-64-128 channel 3x3 conv pairs with
    BatchNorm, max pooling, dropout, two linear layers."""

    def __init__(self):
        super().__init__()
        layers, cin = [], 3
        for cout in (32, 64, 128):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                       nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.3), nn.Linear(128 * 16, 256), nn.ReLU(),
                                        nn.Linear(256, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


class CifarLeNet(nn.Module):
    """LeNet-5 on 3x32x32 images: 3->6 and 6->16 5x5 convs, average pooling, tanh."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 5)
        self.c2 = nn.Conv2d(6, 16, 5)
        self.f1 = nn.Linear(400, 120)
        self.f2 = nn.Linear(120, 84)
        self.f3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.avg_pool2d(torch.tanh(self.c1(x)), 2)
        x = F.avg_pool2d(torch.tanh(self.c2(x)), 2)
        x = torch.flatten(x, 1)
        return self.f3(torch.tanh(self.f2(torch.tanh(self.f1(x)))))


class M5(nn.Module):
    """M5 raw-audio classifier (Dai et al. 2017): a strided 80-tap Conv1d, then
    3-tap Conv1d blocks with BatchNorm1d and max pooling, global average."""

    def __init__(self):
        super().__init__()
        chans = [(1, 128, 80, 4), (128, 128, 3, 1), (128, 256, 3, 1), (256, 512, 3, 1)]
        layers = []
        for cin, cout, k, s in chans:
            layers += [nn.Conv1d(cin, cout, k, s), nn.BatchNorm1d(cout), nn.ReLU(), nn.MaxPool1d(4)]
        self.body = nn.Sequential(*layers[:-1])
        self.head = nn.Linear(512, 35)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=2))


def _tv(name, **kw):
    import torchvision
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


def _bert():
    from transformers import BertConfig, BertModel
    return LastHidden(BertModel(BertConfig(attn_implementation="eager", use_cache=False)))


def _gpt2():
    from transformers import GPT2Config, GPT2Model
    return LastHidden(GPT2Model(GPT2Config(attn_implementation="eager", use_cache=False, n_layer=6)))


def _distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    return LastHidden(DistilBertModel(DistilBertConfig(attn_implementation="eager")))


def _bert_sdpa():
    from transformers import BertConfig, BertModel
    return LastHidden(BertModel(BertConfig(attn_implementation="sdpa", use_cache=False)))


def _gpt2_sdpa():
    from transformers import GPT2Config, GPT2Model
    return LastHidden(GPT2Model(GPT2Config(attn_implementation="sdpa", use_cache=False, n_layer=6)))


def _llama():
    from transformers import LlamaConfig, LlamaModel
    return LastHidden(LlamaModel(LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                                             num_attention_heads=8, num_key_value_heads=8, vocab_size=32000,
                                             max_position_embeddings=512, use_cache=False)))


def _t5_encoder():
    from transformers import T5Config, T5EncoderModel
    return LastHidden(T5EncoderModel(T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128,
                                              attn_implementation="eager", use_cache=False)))


def _albert():
    from transformers import AlbertConfig, AlbertModel
    return LastHidden(AlbertModel(AlbertConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                                                 attn_implementation="eager")))


def _qwen2():
    from transformers import Qwen2Config, Qwen2Model
    return LastHidden(Qwen2Model(Qwen2Config(hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
                                             num_attention_heads=8, num_key_value_heads=2, vocab_size=32000,
                                             max_position_embeddings=512, use_cache=False)))


def _opt():
    from transformers import OPTConfig, OPTModel
    return LastHidden(OPTModel(OPTConfig(hidden_size=512, ffn_dim=2048, num_hidden_layers=4, num_attention_heads=8,
                                         word_embed_proj_dim=512, vocab_size=32000, max_position_embeddings=512,
                                         use_cache=False)))


def _roberta():
    from transformers import RobertaConfig, RobertaModel
    return LastHidden(RobertaModel(RobertaConfig(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1,
                                                 use_cache=False), add_pooling_layer=False))


class LSTMTagger(nn.Module):
    """A sequence tagger: token embeddings, a 2-layer bidirectional LSTM, a
    linear head on every step."""
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10000, 128)
        self.lstm = nn.LSTM(128, 256, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(512, 32)

    def forward(self, x):
        y, _ = self.lstm(self.emb(x))
        return self.head(y)


class GRUClassifier(nn.Module):
    """A keyword spotter: a 2-layer GRU over 80-dim audio frames, the last
    layer's final state into a linear head."""
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(80, 384, num_layers=2, batch_first=True)
        self.head = nn.Linear(384, 35)

    def forward(self, x):
        _, h = self.gru(x)
        return self.head(h[-1])


class CharRNN(nn.Module):
    """A character-level language model: embeddings, a 3-layer Elman RNN
    (tanh), logits on every step."""
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(128, 64)
        self.rnn = nn.RNN(64, 512, num_layers=3, batch_first=True)
        self.head = nn.Linear(512, 128)

    def forward(self, x):
        y, _ = self.rnn(self.emb(x))
        return self.head(y)


def image(batch):
    return torch.randn(batch, *IMAGE)


def tokens(batch, vocab=30522, seq=128):
    return torch.randint(0, vocab, (batch, seq))


# name: (build, make_input, batches, in the shared truth)
MODELS = {
    "mlp": (MLP, lambda b: torch.randn(b, 1, 28, 28), [1, 64, 512], True),
    "lenet": (LeNet, lambda b: torch.randn(b, 1, 28, 28), [1, 64, 512], True),
    "resnet18": (_tv("resnet18"), image, [1, 8, 32, 64], True),
    "mobilenet_v2": (_tv("mobilenet_v2"), image, [1, 8, 32], True),
    "squeezenet1_0": (_tv("squeezenet1_0"), image, [1, 8, 32], True),
    "bert_base": (_bert, tokens, [1, 8, 32], True),
    # never seen while the rules were written
    "resnet50": (_tv("resnet50"), image, [1, 8, 32], False),
    "vgg11_bn": (_tv("vgg11_bn"), image, [1, 8, 32], False),
    "alexnet": (_tv("alexnet"), image, [1, 8, 32], False),
    "densenet121": (_tv("densenet121"), image, [1, 8, 32], False),
    "googlenet": (_tv("googlenet", aux_logits=False, init_weights=True), image, [1, 8, 32], False),
    "shufflenet_v2_x1_0": (_tv("shufflenet_v2_x1_0"), image, [1, 8, 32], False),
    "mobilenet_v3_small": (_tv("mobilenet_v3_small"), image, [1, 8, 32], False),
    "efficientnet_b0": (_tv("efficientnet_b0"), image, [1, 8, 32], False),
    "regnet_x_400mf": (_tv("regnet_x_400mf"), image, [1, 8, 32], False),
    "convnext_tiny": (_tv("convnext_tiny"), image, [1, 8, 32], False),
    "vit_b_16": (_tv("vit_b_16"), image, [1, 8, 32], False),
    "gpt2_6l": (_gpt2, lambda b: tokens(b, 50257), [1, 8, 32], False),
    "distilbert": (_distilbert, tokens, [1, 8, 32], False),
    "convnet1d": (ConvNet1d, lambda b: torch.randn(b, 16, 1024), [1, 8, 64], False),
    "mixer_mlp": (MixerMLP, lambda b: torch.randn(b, 64, 48), [1, 8, 64], False),
    # added in session 4 to test that session's rules on models they were not
    # written against: grouped and strided 1x1 convs (ResNeXt), Hugging Face's
    # default sdpa attention, windowed attention with an explicit softmax (Swin)
    "resnext50_32x4d": (_tv("resnext50_32x4d"), image, [1, 8, 32], False),
    "bert_sdpa": (_bert_sdpa, tokens, [1, 8, 32], False),
    "swin_t": (_tv("swin_t"), image, [1, 8, 32], False),
    # and three measured after the last rule, as a blind check
    "regnet_y_400mf": (_tv("regnet_y_400mf"), image, [1, 8, 32], False),
    "mobilenet_v3_large": (_tv("mobilenet_v3_large"), image, [1, 8, 32], False),
    "gpt2_sdpa": (_gpt2_sdpa, lambda b: tokens(b, 50257), [1, 8, 32], False),
    # session 5: a blind set, measured before any rule of that session:
    # plain and wide residual nets without and with BN, NAS-found depthwise
    # nets, a decoder with rotary embeddings, RMSNorm and gated MLPs (Llama,
    # sdpa), T5's encoder (relative position bias, no biases) and ALBERT
    # (one layer's weights shared by all twelve)
    "vgg16": (_tv("vgg16"), image, [1, 8, 32], False),
    "wide_resnet50_2": (_tv("wide_resnet50_2"), image, [1, 8, 32], False),
    "mnasnet1_0": (_tv("mnasnet1_0"), image, [1, 8, 32], False),
    "efficientnet_v2_s": (_tv("efficientnet_v2_s"), image, [1, 8, 32], False),
    "llama_4l": (_llama, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "t5_encoder": (_t5_encoder, lambda b: tokens(b, 32128), [1, 8, 32], False),
    "albert_base": (_albert, lambda b: tokens(b, 30000), [1, 8, 32], False),
    # session 5, second blind set, measured after that session's rules:
    # grouped-query attention (Qwen2: 8 query heads over 2 key/value heads),
    # OPT's decoder (learned positions, ReLU), RoBERTa with Hugging Face's
    # default attention, and two more torchvision CNNs
    "qwen2_4l": (_qwen2, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "opt_4l": (_opt, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "roberta_base": (_roberta, lambda b: tokens(b, 50265), [1, 8, 32], False),
    "efficientnet_b3": (_tv("efficientnet_b3"), image, [1, 8, 32], False),
    "squeezenet1_1": (_tv("squeezenet1_1"), image, [1, 8, 32], False),
    # session 6, a third blind set, measured after that session's conv
    # weight-gradient rule: small CNNs, where a conv's workspace is a large
    # part of the peak (32x32 images, raw audio), and one more torchvision net
    "cifar_resnet20": (CifarResNet, lambda b: torch.randn(b, 3, 32, 32), [1, 32, 128], False),
    "cifar_vgg": (CifarVGG, lambda b: torch.randn(b, 3, 32, 32), [1, 32, 128], False),
    "cifar_lenet": (CifarLeNet, lambda b: torch.randn(b, 3, 32, 32), [1, 64, 256], False),
    "m5_audio": (M5, lambda b: torch.randn(b, 1, 8000), [1, 8, 64], False),
    "resnet34": (_tv("resnet34"), image, [1, 8, 32], False),
    # recurrent nets: cuDNN's LSTM, GRU and Elman RNN
    "lstm_tagger": (LSTMTagger, lambda b: tokens(b, 10000, 64), [1, 8, 64], False),
    "gru_kws": (GRUClassifier, lambda b: torch.randn(b, 100, 80), [1, 8, 64], False),
    "char_rnn": (CharRNN, lambda b: tokens(b, 128, 256), [1, 8, 64], False),
}


def build(name):
    torch.manual_seed(0)
    return MODELS[name][0]()


def make_input(name, batch):
    torch.manual_seed(1)
    return MODELS[name][1](batch)


def batches(name):
    return MODELS[name][2]
