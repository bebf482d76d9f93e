"""tools/bleu_as_papers.py: both metrics of a written file, one line each."""

import os
import subprocess
import sys

from conftest import REPO


def test_case_and_tokenisation_count_in_sacrebleu_only(tmp_path):
    references = tmp_path / "ref.de"
    references.write_text("Ein Hund läuft über die Wiese.\nZwei Männer spielen Fußball.\n",
                          encoding="utf-8")
    # The same words, lowercased and with the full stops detached: BLEU 100 once tokenised and
    # lowercased as multi-bleu.perl -lc sees it; sacreBLEU counts the case.
    hypotheses = tmp_path / "hyp.de"
    hypotheses.write_text("ein hund läuft über die wiese .\nzwei männer spielen fußball .\n",
                          encoding="utf-8")
    done = subprocess.run([sys.executable, os.path.join(REPO, "tools", "bleu_as_papers.py"),
                           str(references), str(hypotheses)], capture_output=True, text=True,
                          check=True, env=dict(os.environ, PYTHONPATH=REPO))
    sacre, papers, path = done.stdout.split()
    assert float(papers) == 100.0 and float(sacre) < 60 and path == str(hypotheses)
