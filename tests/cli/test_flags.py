"""Flags: every number has a declared range that parsing enforces, each verb reads a declared set
of flags (others are refused on the command line, allowed in a flagfile), and its help lists
exactly those, grouped, with defaults and ranges."""

import pytest

from conftest import run_cli


def _error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_every_numeric_flag_declares_its_range():
    from tfnmt.cli.flags import FLAGS, GROUPS
    from tfnmt.cli.parsers import NumberParser
    ours = [name for names in GROUPS.values() for name in names]
    numeric = [n for n in ours if FLAGS[n].parser.flag_type() in ("int", "float")]
    assert len(numeric) > 60
    assert [n for n in numeric if not isinstance(FLAGS[n].parser, NumberParser)] == []


def test_every_float_flag_refuses_a_non_finite_value():
    # Before: inf passed every range open above ('> 0', '>= 0'): --learning_rate=inf trained
    # until the loss was nan, then stopped with a FloatingPointError traceback.
    from tfnmt.cli.flags import FLAGS, GROUPS
    floats = [n for names in GROUPS.values() for n in names
              if FLAGS[n].parser.flag_type() == "float"]
    assert len(floats) > 15
    for name in floats:
        for value in ("nan", "inf", "-inf", "1e999"):
            with pytest.raises(ValueError, match="must be a finite number"):
                FLAGS[name].parser.parse(value)


@pytest.mark.parametrize("args, message", [
    (["train", "--learning_rate=inf"], "--learning_rate=inf: must be a finite number: a number > 0"),
    (["train", "--learning_rate=nan"], "--learning_rate=nan: must be a finite number: a number > 0"),
    (["translate", "--decode_batch_size=-1"], "--decode_batch_size=-1: must be an integer >= 1"),
    (["translate", "--decode_batch_size=0"], "--decode_batch_size=0: must be an integer >= 1"),
    (["evaluate", "--decode_batch_size=0"], "--decode_batch_size=0: must be an integer >= 1"),
    (["translate", "--max_input_length=-5"], "--max_input_length=-5: must be an integer >= 1"),
    (["translate", "--beam_size=0"], "--beam_size=0: must be an integer >= 1"),
    (["train", "--label_smoothing=1"], "--label_smoothing=1: must be a number in [0, 1)"),
    (["train", "--learning_rate=0"], "--learning_rate=0: must be a number > 0"),
    (["train", "--train_steps=0"], "--train_steps=0: must be an integer >= 1"),
    (["serve", "--rest_api_port=65536"], "--rest_api_port=65536: must be an integer in [0, 65535]"),
    (["train", "--dropout=1.0"], "--dropout=1.0: must be a number in [0, 1)"),
    (["train", "--d_model=0"], "--d_model=0: must be an integer >= 1"),
])
def test_an_out_of_range_value_is_one_line_before_anything_is_loaded(args, message, capsys):
    # /nonexistent would stop the command with another error once it loads the model.
    assert run_cli(*args, "--model_dir=/nonexistent") == 2
    assert _error(capsys) == f"tfnmt {args[0]}: error: {message}"


def test_beam_size_zero_with_an_export_is_refused(capsys):
    assert run_cli("translate", "--saved_model=/nonexistent", "--beam_size=0") == 2
    assert "--beam_size=0: must be an integer >= 1" in _error(capsys)


def test_a_model_holds_a_shared_flag_to_its_own_range(corpus, tmp_path, capsys):
    # ctc_nat's deep_encoder variant has no decoder, so the flag takes 0; a Transformer does not.
    from tfnmt.models import catalog
    from tfnmt.errors import ConfigError
    catalog.get("ctc_nat")(20, 20, ctc_variant="deep_encoder", decoder_layers=0, d_model=8,
                            ffn_dim=8, num_heads=2, encoder_layers=1)
    with pytest.raises(ConfigError, match="--decoder_layers=0: model 'transformer' needs an integer >= 1"):
        catalog.get("transformer")(20, 20, decoder_layers=0)
    assert run_cli("train", f"--model_dir={tmp_path / 'm'}", f"--data=text:{corpus}",
                   "--model=transformer", "--decoder_layers=0") == 2
    assert _error(capsys).endswith("--decoder_layers=0: model 'transformer' needs an integer >= 1")


def _numeric_hparams():
    """(model, name, the hybrid's parts that declare it) of every numeric hyper-parameter."""
    from tfnmt.models import catalog, hybrid
    choices = [{}] + [dict(encoder_type=e, decoder_type=d) for e, d in hybrid.pairs()]
    cases = {}
    for model in catalog.names():
        for parts in (choices if model == "hybrid" else [{}]):
            for name, spec in catalog.get(model).declared(parts).items():
                if spec.range is not None:
                    cases.setdefault((model, name), parts)
    return [(model, name, parts) for (model, name), parts in cases.items()]


@pytest.mark.parametrize("model, name, parts", _numeric_hparams())
def test_every_model_refuses_a_hyper_parameter_below_its_range(model, name, parts):
    from tfnmt.errors import ConfigError
    from tfnmt.models import catalog
    cls = catalog.get(model)
    spec = cls.declared(parts)[name]
    below = spec.range.low - (1 if spec.kind is int else 0.5)
    with pytest.raises(ConfigError, match=f"--{name}="):
        cls(20, 20, **parts, **{name: spec.kind(below)})


def test_a_numeric_hyper_parameter_cannot_be_declared_without_a_range():
    from tfnmt.layers.hparams import HParam
    with pytest.raises(TypeError, match="declares no bounds"):
        HParam(3, "layers")
    with pytest.raises(TypeError, match="not one of"):
        HParam("gru", "cell", choices=("lau",))


def _choice_hparams():
    # (A hybrid declares the hyper-parameters of the parts its defaults choose.)
    from tfnmt.models import catalog
    return [(model, name) for model in catalog.names()
            for name, spec in catalog.get(model).declared({}).items() if spec.choices]


@pytest.mark.parametrize("model, name", _choice_hparams())
def test_every_model_refuses_a_value_outside_a_hyper_parameters_choices(model, name):
    from tfnmt.errors import ConfigError
    from tfnmt.models import catalog
    choices = ", ".join(catalog.get(model).declared({})[name].choices)
    with pytest.raises(ConfigError, match=f"^--{name}='bogus': choose one of {choices}$"):
        catalog.get(model)(20, 20, **{name: "bogus"})


@pytest.mark.parametrize("args, message", [
    (["translate", "--model_dir=M", "--d_model=512"],
     "--d_model would be ignored: `tfnmt translate` does not read it (train, info, bench do)"),
    (["translate", "--saved_model=X", "--beam_size=3"],
     "--beam_size would be ignored: `tfnmt translate` reads it only with a checkpoint"),
    (["translate", "--server=http://localhost:1", "--served_model=m", "--max_input_length=9"],
     "--max_input_length would be ignored: `tfnmt translate` reads it only with a checkpoint"),
    (["translate", "--model_dir=M", "--served_model=transformer"],
     "--served_model would be ignored: `tfnmt translate` reads it only with --server"),
    # --model names an architecture; the served model's name has its own flag.
    (["translate", "--server=http://localhost:1", "--model=m"],
     "--model names an architecture, not a served model: name the served model with "
     "--served_model"),
    (["bench", "--bench=serve", "--export_dir=E", "--model=m"],
     "--model names an architecture, not a served model: name the served model with "
     "--served_model"),
    (["export", "--model_dir=M", "--export_dir=E", "--train_steps=5"],
     "--train_steps would be ignored: `tfnmt export` does not read it"),
    (["vocab", "--model_dir=M", "--nojoint_vocab", "--learning_rate=1"],
     "--learning_rate would be ignored: `tfnmt vocab` does not read it"),
    (["bench", "--bench=translate", "--model_dir=M", "--bench_steps=3"],
     "--bench_steps would be ignored: `tfnmt bench` reads it only with --bench=train"),
    (["train", "--model_dir=M", "--evaluate_at_end=false", "--lowercase"],
     "--lowercase would be ignored: `tfnmt train` reads it only with --evaluate_at_end"),
])
def test_a_flag_the_verb_would_ignore_is_refused_on_the_command_line(args, message, capsys):
    assert run_cli(*args) == 2
    assert _error(capsys).startswith(f"tfnmt {args[0]}: error: {message}")


@pytest.mark.slow
def test_a_flagfile_may_hold_flags_the_verb_does_not_read(trained_model, corpus, tmp_path, capsys):
    from conftest import tiny_train_flags
    flagfile = tmp_path / "all.cfg"
    flagfile.write_text("\n".join(tiny_train_flags(corpus, trained_model)) + "\n--export_dir=x\n")
    source = tmp_path / "in.txt"
    source.write_text("the dog\n")
    assert run_cli("translate", f"--flagfile={flagfile}", f"--input={source}") == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_a_positional_argument_is_refused(capsys):
    assert run_cli("translate", "--model_dir=M", "in.txt") == 2
    assert "unexpected argument 'in.txt'" in _error(capsys)


def test_a_missing_flagfile_is_one_plain_line(capsys):
    assert run_cli("train", "--flagfile=/nonexistent.cfg") == 2
    line = _error(capsys)
    assert line.startswith("tfnmt train: error: cannot open flagfile: ")
    assert "/nonexistent.cfg" in line and "ERROR" not in line


def test_verb_help_lists_only_what_the_verb_reads_with_defaults_and_ranges(capsys):
    def words():  # the help wrapped to 100 columns, as one line
        return " ".join(capsys.readouterr().out.split())

    assert run_cli("translate", "--help") == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == "tfnmt translate: translate a file or stdin"
    assert len(lines) < 100
    assert "--beam_size" in text and "[default 4; an integer >= 1]" in text
    assert "decoding, only with a checkpoint" in text
    for unread in ("--d_model", "--train_steps", "--rest_api_port", "--bench_steps", "--undefok",
                   "--vocab_size", "absl"):
        assert unread not in text, unread
    assert run_cli("train", "--help") == 0
    text = capsys.readouterr().out
    assert "\nmodel (" in text and "--d_model" in text and "transformer 512" in text
    assert "--rest_api_port" not in text and "--saved_model" not in text
    assert run_cli("serve", "--help") == 0
    text = words()
    assert "[default 8501; an integer in [0, 65535]]" in text and "--d_model" not in text
    assert " --batching_parameters_file tfnmt serve: " in text  # a name filling its column


def test_tfnmt_help_lists_the_verbs_one_line_each(capsys):
    from tfnmt.cli.verbs import VERBS
    assert run_cli("--help") == 0
    lines = capsys.readouterr().out.splitlines()
    for verb, spec in VERBS.items():
        assert [line.split(None, 1) for line in lines if line.startswith(f"  {verb} ")] == [
            [verb, spec.summary]]


def test_serve_turns_the_demo_page_off_with_a_positive_flags_negation(capsys):
    # The flag was `no_demo`, listed as `--[no]no_demo` and negated as `--nono_demo`.
    from tfnmt.cli.flags import FLAGS, read
    from tfnmt.serving.options import ServeOptions
    assert run_cli("serve", "--help") == 0
    text = capsys.readouterr().out
    assert "--[no]demo " in text and "no_demo" not in text
    FLAGS.unparse_flags()
    try:
        FLAGS(["tfnmt", "--nodemo"])
        assert read(ServeOptions).demo is False
        FLAGS.unparse_flags()
        FLAGS(["tfnmt"])
        assert read(ServeOptions).demo is True
    finally:
        FLAGS.unparse_flags()


def _model_flags(text):
    """{name: its help and bracketed facts} of the hyper-parameter flags a help lists."""
    from tfnmt.models import catalog
    words = " ".join(text.split())
    shown = {}
    for name in catalog.hparam_names():
        for flag in (f" --{name} ", f" --[no]{name} "):
            if flag in words:
                shown[name] = words.split(flag, 1)[1].split("]", 1)[0] + "]"
    return shown


def test_train_help_with_a_model_lists_that_models_flags_only(capsys):
    # It listed every model's 48 hyper-parameters whatever --model said.
    from tfnmt.models import catalog
    assert run_cli("train", "--help") == 0
    every = _model_flags(capsys.readouterr().out)
    assert set(every) == set(catalog.hparam_names())
    assert "transformer 512" in every["d_model"]
    assert run_cli("train", "--model=transformer", "--help") == 0
    text = capsys.readouterr().out
    assert "--beam_size" in text and "--train_steps" in text and "--model " in text
    shown = _model_flags(text)
    assert set(shown) == set(catalog.get("transformer").HPARAMS)
    assert shown["d_model"].endswith("[default 512; an integer >= 1]")
    # A hybrid's are those of the parts its flags choose.
    assert run_cli("train", "--model=hybrid", "--decoder_type=luong", "--help") == 0
    shown = _model_flags(capsys.readouterr().out)
    assert "lstm_units" in shown and "growth_rate" not in shown
