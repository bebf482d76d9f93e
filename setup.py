from setuptools import find_packages, setup

# Ranges, not pins, so that tfnmt installs beside other packages: each lower bound is the version
# the test suite last ran on; each upper bound the next release that might break it (the next
# minor of TensorFlow and the packages released with it, which must match; the next major
# elsewhere). Widen a bound after the suite passes on the new version.
SACREBLEU = "sacrebleu>=2.6,<2.7"  # its signature (version:2.6.0) is in every report
CTRANSLATE2 = "ctranslate2>=4.8.5,<4.9"  # the model format `tfnmt export` writes

setup(
    name="tfnmt",
    version="0.1.0",
    description="Neural machine translation research architectures on TensorFlow 2 / Keras 3",
    packages=find_packages(include=["tfnmt", "tfnmt.*"]),
    package_data={"tfnmt.serving": ["demo.html"]},
    python_requires=">=3.10",
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "keras>=3.15.1,<3.16",
        "tensorflow-text>=2.21.1,<2.22",
        "tensorflow-serving-api>=2.21,<2.22",  # TF Serving's config messages (serving/config.py)
        "tensorboard>=2.21,<2.22",  # tf.summary; TensorFlow 2.21 no longer pulls it in
        "tensorflow-datasets>=4.9.10,<4.10",
        "ai-edge-litert>=2.3,<2.4",  # the TFLite interpreter of --format=tflite exports
        SACREBLEU,
        "sacremoses>=0.1,<0.3",  # the literature's Multi30k BLEU (evaluation/bleu.py)
        # cli/flags.py and cli/main.py read flagfiles and suggest verbs through absl internals.
        "absl-py>=2.1,<3",
        "sentencepiece>=0.2,<0.3",
        "tqdm>=4.60,<5",
        "waitress>=3.0,<4",
        "requests>=2.31,<3",
        "matplotlib>=3.8,<4",  # `tfnmt experiment`'s plots
    ],
    extras_require={
        # BLEU on Japanese / Korean targets tokenises with MeCab (sacreBLEU's ja-mecab, ko-mecab).
        "ja": [SACREBLEU.replace("sacrebleu", "sacrebleu[ja]")],
        "ko": [SACREBLEU.replace("sacrebleu", "sacrebleu[ko]")],
        # `tfnmt export --format=ctranslate2`, `tfnmt bench --compare_ctranslate2`.
        "ctranslate2": [CTRANSLATE2],
        # What the suite needs beyond the runtime: the three extras above (BLEU of ja/ko, the
        # CTranslate2 export and bench) and selenium, whose browser test of the demo page drives
        # the system's Chromium (.ci/run installs it).
        "test": ["pytest>=8,<10", "pytest-xdist>=3.5,<4", "selenium>=4.20,<5",
                 SACREBLEU.replace("sacrebleu", "sacrebleu[ja,ko]"), CTRANSLATE2],
    },
    entry_points={"console_scripts": ["tfnmt=tfnmt.cli.main:run"]},
)
