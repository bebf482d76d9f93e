"""What `tfnmt serve` refuses before it starts (serving/server.py)."""

from conftest import run_cli


def test_serve_refuses_a_tflite_export_and_needs_one_model_source(tmp_path, capsys):
    version = tmp_path / "phone" / "1"
    version.mkdir(parents=True)
    (version / "model.tflite").write_bytes(b"TFL3")
    assert run_cli("serve", f"--export_dir={tmp_path}", "--rest_api_port=0") == 2
    assert "holds a TFLite model: TF Serving and tfnmt serve serve SavedModels only" in capsys.readouterr().err
    assert run_cli("serve", "--rest_api_port=0") == 2
    assert "give --export_dir" in capsys.readouterr().err
