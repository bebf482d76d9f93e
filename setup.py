from setuptools import find_packages, setup

setup(
    name="tfnmt",
    version="0.1.0",
    description="Neural machine translation research architectures on TensorFlow 2 / Keras 3",
    packages=find_packages(include=["tfnmt", "tfnmt.*"]),
    package_data={"tfnmt.serving": ["demo.html"]},
    python_requires=">=3.10",
    install_requires=[
        "tensorflow==2.21.0",
        "keras==3.15.1",
        "tensorflow-text==2.21.1",
        "tensorflow-serving-api==2.21.0",  # TF Serving's config messages (serving/config.py)
        "tensorflow-datasets==4.9.10",
        "sacrebleu==2.6.0",
        "absl-py>=2.1",
        "sentencepiece>=0.2,<0.3",
        "tqdm>=4.60",
        "waitress>=3.0,<4",
        "requests>=2.31",
        "tensorboard>=2.21",
        "ai-edge-litert==2.3.0",
        "matplotlib>=3.8",  # `tfnmt experiment`'s plots
    ],
    # BLEU on Japanese / Korean targets tokenises with MeCab (sacreBLEU's ja-mecab, ko-mecab).
    extras_require={"ja": ["sacrebleu[ja]==2.6.0"], "ko": ["sacrebleu[ko]==2.6.0"],
                    # `tfnmt export --format=ctranslate2`, `tfnmt bench --compare_ctranslate2`.
                    "ctranslate2": ["ctranslate2==4.8.5"],
                    # The demo page's browser test drives the system's Chromium (.ci/run installs it).
                    "test": ["pytest>=8", "pytest-xdist>=3.5", "sacrebleu[ja,ko]==2.6.0", "selenium>=4.20",
                             "ctranslate2==4.8.5"]},
    entry_points={"console_scripts": ["tfnmt=tfnmt.cli.main:run"]},
)
