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


def _conv_bn_relu(cin, cout, dims=2):
    conv, bn = (nn.Conv2d, nn.BatchNorm2d) if dims == 2 else (nn.Conv3d, nn.BatchNorm3d)
    return nn.Sequential(conv(cin, cout, 3, padding=1, bias=False), bn(cout), nn.ReLU())


class UNet(nn.Module):
    """A U-Net (Ronneberger et al. 2015) for 3x128x128 images: four levels of
    two 3x3 conv-BN-ReLU, max pooling down, 2x2 transposed convolutions up,
    the skips concatenated, a 1x1 head of 4 classes."""
    def __init__(self, widths=(32, 64, 128, 256)):
        super().__init__()
        self.down, cin = nn.ModuleList(), 3
        for w in widths:
            self.down.append(nn.Sequential(_conv_bn_relu(cin, w), _conv_bn_relu(w, w)))
            cin = w
        self.bottom = nn.Sequential(_conv_bn_relu(cin, 2 * cin), _conv_bn_relu(2 * cin, 2 * cin))
        self.up, self.merge, cin = nn.ModuleList(), nn.ModuleList(), 2 * cin
        for w in reversed(widths):
            self.up.append(nn.ConvTranspose2d(cin, w, 2, stride=2))
            self.merge.append(nn.Sequential(_conv_bn_relu(2 * w, w), _conv_bn_relu(w, w)))
            cin = w
        self.head = nn.Conv2d(cin, 4, 1)

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips)):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.head(x)


class FCNHead(nn.Module):
    """torchvision's FCN-ResNet50 (dilated backbone, FCN head, bilinear
    upsampling to the input), its "out" map."""
    def __init__(self):
        super().__init__()
        from torchvision.models.segmentation import fcn_resnet50
        self.m = fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False, num_classes=21)

    def forward(self, x):
        return self.m(x)["out"]


class MobileViTLike(nn.Module):
    """A hybrid conv-attention net in MobileViT's pattern (Mehta and Rastegari
    2022): a strided conv stem and inverted-residual depthwise blocks, then at
    two scales a block that unfolds 2x2 patches into tokens, runs two
    transformer encoder layers over them and folds them back, fused with the
    input by a 3x3 conv; global pooling and a linear head."""
    class MV2(nn.Module):
        def __init__(self, cin, cout, stride, expand=4):
            super().__init__()
            h = cin * expand
            self.body = nn.Sequential(nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h), nn.SiLU(),
                                      nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), nn.BatchNorm2d(h),
                                      nn.SiLU(), nn.Conv2d(h, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    class ViTBlock(nn.Module):
        def __init__(self, c, d, layers=2, heads=4):
            super().__init__()
            self.local = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.SiLU(), nn.Conv2d(c, d, 1))
            layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.project = nn.Conv2d(d, c, 1)
            self.fuse = nn.Conv2d(2 * c, c, 3, padding=1)

        def forward(self, x):
            y = self.local(x)
            b, d, h, w = y.shape
            t = y.reshape(b, d, h // 2, 2, w // 2, 2).permute(0, 3, 5, 2, 4, 1).reshape(b * 4, h * w // 4, d)
            t = self.encoder(t)
            y = t.reshape(b, 2, 2, h // 2, w // 2, d).permute(0, 5, 3, 1, 4, 2).reshape(b, d, h, w)
            return self.fuse(torch.cat([x, self.project(y)], dim=1))

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU(),
            self.MV2(16, 32, 1), self.MV2(32, 48, 2), self.MV2(48, 48, 1), self.MV2(48, 64, 2),
            self.ViTBlock(64, 96), self.MV2(64, 80, 2), self.ViTBlock(80, 120),
            nn.Conv2d(80, 320, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(320, 1000))

    def forward(self, x):
        return self.net(x)


class PoolFormerLike(nn.Module):
    """A pooling mixer in PoolFormer's pattern (Yu et al. 2022): patch
    embeddings by strided convs, then blocks whose token mixer is
    avgpool(norm(x)) - norm(x) and whose MLP is two 1x1 convs, at four
    scales; global pooling and a linear head."""
    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.norm1, self.norm2 = nn.GroupNorm(1, c), nn.GroupNorm(1, c)
            self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
            self.mlp = nn.Sequential(nn.Conv2d(c, 4 * c, 1), nn.GELU(), nn.Conv2d(4 * c, c, 1))

        def forward(self, x):
            y = self.norm1(x)
            x = x + self.pool(y) - y
            return x + self.mlp(self.norm2(x))

    def __init__(self, widths=(64, 128, 320, 512), depths=(2, 2, 4, 2)):
        super().__init__()
        layers, cin = [], 3
        for i, (w, d) in enumerate(zip(widths, depths)):
            layers.append(nn.Conv2d(cin, w, 7 if i == 0 else 3, 4 if i == 0 else 2, 2 if i == 0 else 1))
            layers += [self.Block(w) for _ in range(d)]
            cin = w
        self.net = nn.Sequential(*layers, nn.GroupNorm(1, cin), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(cin, 1000))

    def forward(self, x):
        return self.net(x)


class Seq2Seq(nn.Module):
    """An encoder-decoder transformer with cross-attention: token embeddings,
    nn.Transformer (d_model 512, 8 heads, 4 + 4 layers, causal decoder mask),
    the same tokens shifted as the decoder's input, a vocabulary head."""
    def __init__(self, vocab=16000, d=512):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.t = nn.Transformer(d, 8, 4, 4, 2048, dropout=0.1, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, src):
        tgt = torch.roll(src, 1, dims=1)
        mask = torch.triu(torch.full((src.shape[1], src.shape[1]), float("-inf"), device=src.device), 1)
        return self.head(self.t(self.emb(src), self.emb(tgt), tgt_mask=mask))


def _r3d():
    from torchvision.models.video import r3d_18
    return r3d_18(weights=None)


def _gpt2_long():
    from transformers import GPT2Config, GPT2Model
    return LastHidden(GPT2Model(GPT2Config(attn_implementation="sdpa", use_cache=False, n_layer=4, n_positions=2048)))


class DecoderHidden(nn.Module):
    """A Hugging Face encoder-decoder that takes input_ids, feeds the same
    tokens shifted by one as the decoder's input, and returns the decoder's
    last_hidden_state."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, decoder_input_ids=torch.roll(input_ids, 1, dims=1)).last_hidden_state


def _t5_encdec():
    from transformers import T5Config, T5Model
    return DecoderHidden(T5Model(T5Config(d_model=512, d_ff=2048, num_layers=4, num_decoder_layers=4, num_heads=8,
                                          vocab_size=32128, use_cache=False)))


def _bart():
    from transformers import BartConfig, BartModel
    return DecoderHidden(BartModel(BartConfig(d_model=512, encoder_layers=4, decoder_layers=4,
                                              encoder_attention_heads=8, decoder_attention_heads=8,
                                              encoder_ffn_dim=2048, decoder_ffn_dim=2048, vocab_size=50265,
                                              use_cache=False, attn_implementation="eager")))


def _gpt_neox():
    from transformers import GPTNeoXConfig, GPTNeoXModel
    return LastHidden(GPTNeoXModel(GPTNeoXConfig(hidden_size=512, intermediate_size=2048, num_hidden_layers=4,
                                                 num_attention_heads=8, rotary_pct=0.25, vocab_size=32000,
                                                 max_position_embeddings=512, use_parallel_residual=True,
                                                 use_cache=False, attn_implementation="eager")))


def _bloom():
    from transformers import BloomConfig, BloomModel
    return LastHidden(BloomModel(BloomConfig(hidden_size=512, n_layer=4, n_head=8, vocab_size=32000,
                                             use_cache=False)))


def _deberta_v2():
    from transformers import DebertaV2Config, DebertaV2Model
    return LastHidden(DebertaV2Model(DebertaV2Config(hidden_size=384, num_hidden_layers=6, num_attention_heads=6,
                                                     intermediate_size=1536, vocab_size=32000,
                                                     max_position_embeddings=512, relative_attention=True,
                                                     position_buckets=256, pos_att_type=["p2c", "c2p"])))


class WhisperEncoderHidden(nn.Module):
    """Whisper's encoder: two Conv1d over 80 log-mel bins, then transformer
    layers; returns last_hidden_state."""

    def __init__(self):
        super().__init__()
        from transformers import WhisperConfig
        from transformers.models.whisper.modeling_whisper import WhisperEncoder
        self.m = WhisperEncoder(WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                                              encoder_ffn_dim=1536, num_mel_bins=80, max_source_positions=750,
                                              attn_implementation="eager"))

    def forward(self, x):
        return self.m(input_features=x).last_hidden_state


def _falcon():
    from transformers import FalconConfig, FalconModel
    return LastHidden(FalconModel(FalconConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                                               num_kv_heads=1, multi_query=True, parallel_attn=True,
                                               new_decoder_architecture=False, alibi=False, bias=False,
                                               vocab_size=32000, max_position_embeddings=512,
                                               use_cache=False, attn_implementation="eager")))


def _clip_vision():
    from transformers import CLIPVisionConfig, CLIPVisionModel

    class ClipHidden(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = CLIPVisionModel(CLIPVisionConfig(hidden_size=384, intermediate_size=1536, num_hidden_layers=6,
                                                      num_attention_heads=6, image_size=224, patch_size=16,
                                                      hidden_act="quick_gelu", attn_implementation="eager"))

        def forward(self, x):
            return self.m(pixel_values=x).last_hidden_state
    return ClipHidden()


def _segformer():
    from transformers import SegformerConfig, SegformerModel

    class SegformerHidden(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = SegformerModel(SegformerConfig())  # MiT-b0: 4 stages, efficient attention

        def forward(self, x):
            return self.m(pixel_values=x).last_hidden_state
    return SegformerHidden()


def _gemma():
    from transformers import GemmaConfig, GemmaModel
    return LastHidden(GemmaModel(GemmaConfig(hidden_size=512, intermediate_size=2048, num_hidden_layers=4,
                                             num_attention_heads=8, num_key_value_heads=1, head_dim=64,
                                             vocab_size=32000, max_position_embeddings=512, use_cache=False,
                                             attn_implementation="eager")))


def _gpt_bigcode():
    from transformers import GPTBigCodeConfig, GPTBigCodeModel
    return LastHidden(GPTBigCodeModel(GPTBigCodeConfig(n_embd=512, n_layer=4, n_head=8, n_positions=512,
                                                       vocab_size=32000, multi_query=True, use_cache=False,
                                                       attn_implementation="eager")))


def _mobilebert():
    from transformers import MobileBertConfig, MobileBertModel
    return LastHidden(MobileBertModel(MobileBertConfig(num_hidden_layers=6, vocab_size=30522),
                                      add_pooling_layer=False))


class PixelHidden(nn.Module):
    """A Hugging Face vision model that takes pixel_values and returns
    last_hidden_state."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(pixel_values=x).last_hidden_state


def _dinov2():
    from transformers import Dinov2Config, Dinov2Model
    return PixelHidden(Dinov2Model(Dinov2Config(hidden_size=384, num_hidden_layers=6, num_attention_heads=6,
                                                image_size=224, patch_size=14, attn_implementation="eager")))


def _convnextv2():
    from transformers import ConvNextV2Config, ConvNextV2Model
    return PixelHidden(ConvNextV2Model(ConvNextV2Config(depths=[2, 2, 6, 2], hidden_sizes=[80, 160, 320, 640])))


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
    # grouped and strided 1x1 convs (ResNeXt), Hugging Face's default sdpa
    # attention, windowed attention with an explicit softmax (Swin)
    "resnext50_32x4d": (_tv("resnext50_32x4d"), image, [1, 8, 32], False),
    "bert_sdpa": (_bert_sdpa, tokens, [1, 8, 32], False),
    "swin_t": (_tv("swin_t"), image, [1, 8, 32], False),
    # a blind check: measured before the rules that touch them were changed
    "regnet_y_400mf": (_tv("regnet_y_400mf"), image, [1, 8, 32], False),
    "mobilenet_v3_large": (_tv("mobilenet_v3_large"), image, [1, 8, 32], False),
    "gpt2_sdpa": (_gpt2_sdpa, lambda b: tokens(b, 50257), [1, 8, 32], False),
    # a blind set, measured before the rules they test were written: plain
    # and wide residual nets without and with BN, NAS-found depthwise
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
    # a second blind set, measured after those rules: grouped-query attention (Qwen2: 8 query heads over 2 key/value heads),
    # OPT's decoder (learned positions, ReLU), RoBERTa with Hugging Face's
    # default attention, and two more torchvision CNNs
    "qwen2_4l": (_qwen2, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "opt_4l": (_opt, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "roberta_base": (_roberta, lambda b: tokens(b, 50265), [1, 8, 32], False),
    "efficientnet_b3": (_tv("efficientnet_b3"), image, [1, 8, 32], False),
    "squeezenet1_1": (_tv("squeezenet1_1"), image, [1, 8, 32], False),
    # a third blind set, measured after the conv weight-gradient rule: small
    # CNNs, where a conv's workspace is a large
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
    # families the zoo lacked: an encoder-decoder CNN with transposed convs
    # and concatenated skips, a segmentation head, 3-D convs, a hybrid
    # conv-attention net, a pooling mixer, an encoder-decoder transformer
    # with cross-attention, a long-sequence decoder
    "unet": (UNet, lambda b: torch.randn(b, 3, 128, 128), [1, 8, 32], False),
    "fcn_resnet50": (FCNHead, image, [1, 4, 8], False),
    "r3d_18": (_r3d, lambda b: torch.randn(b, 3, 16, 112, 112), [1, 4, 8], False),
    "mobilevit_like": (MobileViTLike, lambda b: torch.randn(b, 3, 256, 256), [1, 8, 32], False),
    "poolformer_like": (PoolFormerLike, image, [1, 8, 32], False),
    "seq2seq": (Seq2Seq, lambda b: tokens(b, 16000, 128), [1, 8, 32], False),
    "gpt2_long": (_gpt2_long, lambda b: tokens(b, 50257, 1024), [1, 4, 8], False),
    # a blind check of the frame and reduction rules: Hugging Face's
    # encoder-decoders (T5 with relative position bias and no biases, BART
    # with learned positions and biased projections), measured after them
    "t5_encdec": (_t5_encdec, lambda b: tokens(b, 32128), [1, 8, 32], False),
    "bart_small": (_bart, lambda b: tokens(b, 50265), [1, 8, 32], False),
    # a blind check of families no rule was written for, measured once:
    # GPT-NeoX (parallel attention and MLP residuals, rotary on a quarter of
    # each head), BLOOM (ALiBi biases, fused QKV), DeBERTa-v2 (disentangled
    # relative-position attention), Whisper's encoder (Conv1d front over
    # log-mel frames) and MaxViT (MBConv with squeeze-excitation, block and
    # grid attention)
    "gpt_neox_4l": (_gpt_neox, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "bloom_4l": (_bloom, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "deberta_v2_small": (_deberta_v2, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "whisper_encoder": (WhisperEncoderHidden, lambda b: torch.randn(b, 80, 1500), [1, 8, 32], False),
    "maxvit_t": (_tv("maxvit_t"), image, [1, 8, 32], False),
    # a second blind check, measured once: Falcon (multi-query attention,
    # parallel attention and MLP, rotary), CLIP's vision tower (quick_gelu,
    # pre-LayerNorm), SegFormer's MiT-b0 encoder (spatial-reduction
    # attention, Mix-FFN depthwise convs), torchvision's Swin V2 (cosine
    # attention, a continuous position-bias MLP) and Inception v3
    # (factorized convs, 299x299)
    "falcon_4l": (_falcon, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "clip_vision": (_clip_vision, image, [1, 8, 32], False),
    "segformer_b0": (_segformer, lambda b: torch.randn(b, 3, 512, 512), [1, 8, 32], False),
    "swin_v2_t": (_tv("swin_v2_t"), image, [1, 8, 32], False),
    "inception_v3": (_tv("inception_v3", aux_logits=False, init_weights=True), lambda b: torch.randn(b, 3, 299, 299),
                     [1, 8, 32], False),
    # a third blind check, measured once: Gemma (GeGLU, one key/value head
    # repeated, scaled embeddings), GPT-BigCode (multi-query attention with a
    # fused key/value projection), MobileBERT (bottlenecks, NoNorm, four
    # stacked feed-forwards), DINOv2 (LayerScale, patch 14) and ConvNeXt V2
    # (global response normalization)
    "gemma_4l": (_gemma, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "gpt_bigcode_4l": (_gpt_bigcode, lambda b: tokens(b, 32000), [1, 8, 32], False),
    "mobilebert": (_mobilebert, tokens, [1, 8, 32], False),
    "dinov2_small": (_dinov2, image, [1, 8, 32], False),
    "convnextv2_nano": (_convnextv2, image, [1, 8, 32], False),
}


def build(name):
    torch.manual_seed(0)
    return MODELS[name][0]()


def make_input(name, batch):
    torch.manual_seed(1)
    return MODELS[name][1](batch)


def batches(name):
    return MODELS[name][2]
