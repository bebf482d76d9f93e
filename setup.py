from setuptools import find_packages, setup

setup(
    name="tfnmt",
    version="0.1.0",
    description="Neural machine translation research architectures on TensorFlow 2 / Keras 3",
    packages=find_packages(include=["tfnmt", "tfnmt.*"]),
    python_requires=">=3.10",
    install_requires=[
        "tensorflow==2.21.0",
        "keras==3.15.1",
        "tensorflow-text==2.21.1",
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
                    "test": ["pytest>=8", "sacrebleu[ja,ko]==2.6.0"]},
    entry_points={"console_scripts": ["tfnmt=tfnmt.cli.main:run"]},
)
