"""Our own version of pytorch/examples word_language_model (data.py, model.py, main.py), written
as its authors wrote it with lazytensor imported as torch (as test_public_scripts.py), shrunk to run
in seconds: a word-level Dictionary / Corpus, `batchify` (narrow, view, t, contiguous), `get_batch`
cutting bptt-long chunks (each epoch's last one shorter), RNNModel (Dropout, Embedding, a 2-layer
LSTM or GRU, Linear decoder, weight tying, init_weights through nn.init.uniform_ / zeros_,
init_hidden through `weight.new_zeros`, log_softmax), NLLLoss, the hidden state carried across
batches through `repackage_hidden`, clip_grad_norm_ and manual SGD `p.data.add_(p.grad, alpha=-lr)`,
evaluate() under eval() / no_grad, `lr /= 4.0` when the validation loss does not improve, and the
best model reloaded and evaluated on the test split.

Each configuration runs with torch 2.13 (the oracle) and with lazytensor on "cpu" and "lazy", from
the same corpus and initial weights (copied from NumPy). Checked: per-step training losses, every
validation loss, the lr schedule and the test loss; and that after the first 3 training steps
nothing new compiles except, once, the first epoch's shorter last batch (a new shape).

torch's and lazytensor's random streams differ, so the runs compared with torch have dropout 0.
The script's dropout (0.2) runs on lazytensor only: seeded alike, cpu and lazy must agree."""
import functools
import math

import numpy as np
import pytest
import torch

import lazytensor as lt
from test_script_mnist_vae import OTHER, _compiles, _init_from_numpy
from test_script_seq_mingpt import run

# main.py's arguments, shrunk: a 2-layer RNN of 16 units (emsize == nhid, as weight tying needs),
# batches of 4 columns, bptt 8, eval_batch_size 10 as in the script. The script's lr 20 suits its
# 200 units; at 16 the tied LSTM's validation loss stays above the uniform one (ln 24) for 5
# epochs. At lr 10 both configurations learn, and the second epoch's validation loss rises, so
# `lr /= 4.0` runs (with a margin of 0.5%, against 1e-7 between the libraries).
EMSIZE = NHID = 16
NLAYERS, BPTT, BATCH_SIZE, EVAL_BATCH_SIZE, CLIP, LR, EPOCHS = 2, 8, 4, 10, 0.25, 10.0, 6
# The corpus: 211 training tokens make 52 rows of 4 columns, 51 targets each: every epoch is 6
# batches of seq_len 8 and a last one of 3. Validation: 217 tokens, 21 rows of 10 (8, 8, 4).
TRAIN_SEQ_LENS = [BPTT] * 6 + [3]
WORDS = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "tree", "and", "then",
         "big", "small", "red", "old", "it", "was", "very", "here", "there", "slept", "ate"]


def _word_corpus(n_lines, seed):
    """Lines of words from a Markov chain (sparse random transitions), standing in for
    wikitext-2's train.txt / valid.txt / test.txt."""
    rs = np.random.default_rng(seed)
    trans = np.random.default_rng(7).dirichlet(np.full(len(WORDS), 0.1), size=len(WORDS))
    lines, w = [], 0
    for _ in range(n_lines):
        line = []
        for _ in range(rs.integers(3, 12)):
            w = rs.choice(len(WORDS), p=trans[w])
            line.append(WORDS[w])
        lines.append(" ".join(line) + "\n")
    return lines


def make_model_class(lib):
    """model.py's RNNModel for library `lib`."""
    nn, F = lib.nn, lib.nn.functional

    class RNNModel(nn.Module):
        """Container module with an encoder, a recurrent module, and a decoder."""

        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
            super(RNNModel, self).__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            if rnn_type in ['LSTM', 'GRU']:
                self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            else:
                try:
                    nonlinearity = {'RNN_TANH': 'tanh', 'RNN_RELU': 'relu'}[rnn_type]
                except KeyError as e:
                    raise ValueError("""An invalid option for `--model` was supplied,
                        options are ['LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU']""") from e
                self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)

            # Optionally tie weights as in "Using the Output Embedding to Improve Language Models"
            # (Press & Wolf 2016) and "Tying Word Vectors and Word Classifiers" (Inan et al. 2016)
            if tie_weights:
                if nhid != ninp:
                    raise ValueError('When using the tied flag, nhid must be equal to emsize')
                self.decoder.weight = self.encoder.weight

            self.init_weights()

            self.rnn_type = rnn_type
            self.nhid = nhid
            self.nlayers = nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == 'LSTM':
                return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                        weight.new_zeros(self.nlayers, bsz, self.nhid))
            else:
                return weight.new_zeros(self.nlayers, bsz, self.nhid)

    return RNNModel


def word_language_model(lib, dev, rnn_type="LSTM", tied=True, dropout=0.0):
    """main.py with data.py, shrunk. Returns a dict: the per-step training losses and seq_lens, the
    graphs compiled per training step and per evaluate() call, (validation loss, lr) after each
    epoch, the best model's test loss and the vocabulary size."""
    device = dev

    # ---- data.py (reading lines from lists instead of files) ----
    class Dictionary(object):
        def __init__(self):
            self.word2idx = {}
            self.idx2word = []

        def add_word(self, word):
            if word not in self.word2idx:
                self.idx2word.append(word)
                self.word2idx[word] = len(self.idx2word) - 1
            return self.word2idx[word]

        def __len__(self):
            return len(self.idx2word)

    class Corpus(object):
        def __init__(self):
            self.dictionary = Dictionary()
            self.train = self.tokenize(_word_corpus(26, seed=1))
            self.valid = self.tokenize(_word_corpus(26, seed=2))
            self.test = self.tokenize(_word_corpus(20, seed=3))

        def tokenize(self, lines):
            """Tokenizes a text file."""
            # Add words to the dictionary
            for line in lines:
                words = line.split() + ['<eos>']
                for word in words:
                    self.dictionary.add_word(word)

            # Tokenize file content
            idss = []
            for line in lines:
                words = line.split() + ['<eos>']
                ids = []
                for word in words:
                    ids.append(self.dictionary.word2idx[word])
                idss.append(lib.tensor(ids).type(lib.int64))
            ids = lib.cat(idss)

            return ids

    # ---- main.py ----
    lib.manual_seed(1111)  # args.seed: the dropout masks (the initial weights come below)
    corpus = Corpus()

    def batchify(data, bsz):
        # Work out how cleanly we can divide the dataset into bsz parts.
        nbatch = data.size(0) // bsz
        # Trim off any extra elements that wouldn't cleanly fit (remainders).
        data = data.narrow(0, 0, nbatch * bsz)
        # Evenly divide the data across the bsz batches.
        data = data.view(bsz, -1).t().contiguous()
        return data.to(device)

    eval_batch_size = EVAL_BATCH_SIZE
    train_data = batchify(corpus.train, BATCH_SIZE)
    val_data = batchify(corpus.valid, eval_batch_size)
    test_data = batchify(corpus.test, eval_batch_size)

    ntokens = len(corpus.dictionary)
    RNNModel = make_model_class(lib)
    model = RNNModel(rnn_type, ntokens, EMSIZE, NHID, NLAYERS, dropout, tied).to(device)
    # init_weights' and the RNN's own draws differ per library: every parameter from NumPy instead
    _init_from_numpy(lib, model, device, seed=11)

    criterion = lib.nn.NLLLoss()

    def repackage_hidden(h):
        """Wraps hidden states in new Tensors, to detach them from their history."""

        if isinstance(h, lib.Tensor):
            return h.detach()
        else:
            return tuple(repackage_hidden(v) for v in h)

    def get_batch(source, i):
        seq_len = min(BPTT, len(source) - 1 - i)
        data = source[i:i+seq_len]
        target = source[i+1:i+1+seq_len].view(-1)
        return data, target

    losses, seq_lens, step_compiles, eval_compiles = [], [], [], []

    def evaluate(data_source):
        before = _compiles(lib)
        # Turn on evaluation mode which disables dropout.
        model.eval()
        total_loss = 0.
        hidden = model.init_hidden(eval_batch_size)
        with lib.no_grad():
            for i in range(0, data_source.size(0) - 1, BPTT):
                data, targets = get_batch(data_source, i)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        eval_compiles.append(_compiles(lib) - before)
        return total_loss / (len(data_source) - 1)

    def train():
        # Turn on training mode which enables dropout.
        model.train()
        total_loss = 0.
        hidden = model.init_hidden(BATCH_SIZE)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, BPTT)):
            before = _compiles(lib)
            data, targets = get_batch(train_data, i)
            # Starting each batch, we detach the hidden state from how it was previously produced.
            # If we didn't, the model would try backpropagating all the way to start of the dataset.
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()

            # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
            lib.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)

            total_loss += loss.item()
            losses.append(loss.item())  # the script prints total_loss every log_interval batches
            seq_lens.append(len(data))
            step_compiles.append(_compiles(lib) - before)

    # Loop over epochs.
    lr = LR
    best_val_loss = None
    best_state = None
    epochs = []
    for epoch in range(1, EPOCHS + 1):
        train()
        val_loss = evaluate(val_data)
        # Save the model if the validation loss is the best we've seen so far.
        if not best_val_loss or val_loss < best_val_loss:
            # was torch.save(model, f): a copy of the state_dict instead
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
            best_val_loss = val_loss
        else:
            # Anneal the learning rate if no improvement has been seen in the validation dataset.
            lr /= 4.0
        epochs.append((val_loss, lr))

    # Load the best saved model.
    model.load_state_dict(best_state)
    model.rnn.flatten_parameters()
    # Run on test data.
    test_loss = evaluate(test_data)
    return dict(losses=np.array(losses), seq_lens=seq_lens, step_compiles=np.array(step_compiles),
                eval_compiles=np.array(eval_compiles), epochs=np.array(epochs),
                test_loss=test_loss, ntokens=ntokens)


# The configurations, each run once per library and device (run() caches by script object).
SCRIPTS = {"lstm_tied": functools.partial(word_language_model, rnn_type="LSTM", tied=True),
           "gru": functools.partial(word_language_model, rnn_type="GRU", tied=False)}
LSTM_DROPOUT = functools.partial(word_language_model, rnn_type="LSTM", tied=True, dropout=0.2)


def check_compiles(r, device):
    """After the first 3 training steps nothing compiles but the first epoch's last batch: its
    seq_len is new (the lazy device's one graph for it: the previous step's backward and update
    with this forward; its own backward and update run in evaluate()'s first graph). Later
    epochs replay everything, their first step included (init_hidden's zeros again, nothing
    pending after evaluate()), and the validation passes after the first replay the first's."""
    first_short = TRAIN_SEQ_LENS.index(min(TRAIN_SEQ_LENS))
    later = r["step_compiles"].copy()
    short = later[first_short]
    later[first_short] = 0
    assert not later[3:].any(), r["step_compiles"]
    if device == "lazy":
        assert short == 1, r["step_compiles"]
    assert not r["eval_compiles"][1:EPOCHS].any(), r["eval_compiles"]


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_rnn_model_init_weights_tying_and_init_hidden_as_torch(device):
    """model.py's own init (kept in the script runs but overwritten there by NumPy weights)."""
    def build(lib, dev):
        lib.manual_seed(0)
        return make_model_class(lib)("LSTM", 24, EMSIZE, NHID, NLAYERS, 0.2, True).to(dev)
    model, ref = build(lt, device), build(torch, "cpu")
    # Tying: one tensor, named once, as torch (the SGD loop updates it once per step).
    assert model.decoder.weight is model.encoder.weight
    assert [(n, tuple(p.shape)) for n, p in model.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in ref.named_parameters()]
    assert list(model.state_dict()) == list(ref.state_dict())  # decoder.weight listed too
    enc = model.encoder.weight.detach().cpu().numpy()
    assert np.abs(enc).max() <= 0.1 and 0.045 < enc.std() < 0.07  # uniform_(-0.1, 0.1): 0.058
    np.testing.assert_array_equal(model.decoder.bias.detach().cpu().numpy(), np.zeros(24))
    h, c = model.init_hidden(3)
    for t in (h, c):
        assert tuple(t.shape) == (NLAYERS, 3, NHID) and t.dtype == lt.float32
        assert t.device == model.encoder.weight.device and not t.requires_grad
        assert not t.cpu().numpy().any()


@pytest.mark.parametrize("config", list(SCRIPTS))
@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_word_language_model_script_trains_like_torch_and_stops_compiling(device, config):
    want = run(SCRIPTS[config], "torch", "cpu")
    got = run(SCRIPTS[config], "lt", device)
    other = run(SCRIPTS[config], "lt", OTHER[device])
    assert got["seq_lens"] == want["seq_lens"] == TRAIN_SEQ_LENS * EPOCHS
    assert got["ntokens"] == want["ntokens"] == len(WORDS) + 1  # and <eos>
    # float32, clipped SGD at lr 10: measured 3e-7 relative to torch and between cpu and lazy
    # after 42 steps.
    np.testing.assert_allclose(got["losses"], other["losses"], rtol=1e-4)  # cpu == lazy
    np.testing.assert_allclose(got["epochs"], other["epochs"], rtol=1e-4)
    assert got["test_loss"] == pytest.approx(other["test_loss"], rel=1e-4)
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-4)
    np.testing.assert_allclose(got["epochs"], want["epochs"], rtol=1e-4)  # val losses and lrs
    assert got["test_loss"] == pytest.approx(want["test_loss"], rel=1e-4)
    val, lrs = got["epochs"][:, 0], got["epochs"][:, 1]
    assert lrs[0] == LR and lrs[-1] < LR  # the annealing ran (the same epochs as torch: above)
    assert val[-1] < val[0] and got["test_loss"] < math.log(got["ntokens"])  # it learns
    check_compiles(got, device)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_word_language_model_script_with_dropout_is_device_independent(device):
    """The script's dropout (0.2: on the embeddings, between the LSTM's layers and on its output),
    lazytensor only; seeded alike (the script's manual_seed), cpu and lazy agree."""
    got = run(LSTM_DROPOUT, "lt", device)
    other = run(LSTM_DROPOUT, "lt", OTHER[device])
    np.testing.assert_allclose(got["losses"], other["losses"], rtol=1e-4)
    np.testing.assert_allclose(got["epochs"], other["epochs"], rtol=1e-4)
    assert got["test_loss"] == pytest.approx(other["test_loss"], rel=1e-4)
    # The masks do act: the losses are not those of the same run without dropout.
    plain = run(SCRIPTS["lstm_tied"], "lt", device)["losses"]
    assert np.abs(got["losses"] - plain).max() > 1e-2
    check_compiles(got, device)  # a fresh mask per step is a run-time input, not a new graph
