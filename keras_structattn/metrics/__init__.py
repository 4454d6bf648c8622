"""Evaluation metrics.

text: corpus BLEU and chrF through sacreBLEU, with a variable number of
references per segment.

COCO captions (pycocoevalcap 1.2's definitions, `docs/caption_metrics.md`):
ptb_tokenizer (its Stanford PTB tokenisation, in Python), caption_scores
(BLEU-1..4, ROUGE-L, CIDEr-D, and `CiderD`, the self-critical reward),
java_scorers (METEOR and SPICE through its jars, when Java is there) and
coco_caption (`evaluate_captions` on the official file formats).

VQA (`docs/vqa_metrics.md`): vqa_accuracy (the official GT-Vision-Lab VQA
accuracy, `evaluate_vqa`, in its 2021 and pre-2021 versions, and MCAN's
`prepare_answer` for answer vocabularies).

TextVQA (`docs/textvqa_metrics.md`): textvqa (the TextVQA accuracy after
EvalAI's answer normalisation, ANLS with the ST-VQA paper's or mmf's
threshold rule, `evaluate_textvqa`, and readers of the official annotation
JSON, mmf imdb `.npy` files and results).
"""

from keras_structattn.metrics.caption_scores import CiderD
from keras_structattn.metrics.coco_caption import METRICS as CAPTION_METRICS
from keras_structattn.metrics.coco_caption import CaptionScores
from keras_structattn.metrics.coco_caption import evaluate_captions
from keras_structattn.metrics.coco_caption import write_scores_json
from keras_structattn.metrics.ptb_tokenizer import ptb_tokenize
from keras_structattn.metrics.ptb_tokenizer import tokenize_captions
from keras_structattn.metrics.text import BleuResult
from keras_structattn.metrics.text import ChrfResult
from keras_structattn.metrics.text import corpus_bleu
from keras_structattn.metrics.text import corpus_chrf
from keras_structattn.metrics.textvqa import TextVQAScores
from keras_structattn.metrics.textvqa import anls
from keras_structattn.metrics.textvqa import evaluate_textvqa
from keras_structattn.metrics.textvqa import levenshtein
from keras_structattn.metrics.textvqa import normalize_evalai_answer
from keras_structattn.metrics.textvqa import read_textvqa_annotations
from keras_structattn.metrics.textvqa import read_textvqa_results
from keras_structattn.metrics.textvqa import textvqa_accuracy
from keras_structattn.metrics.textvqa import write_textvqa_scores_json
from keras_structattn.metrics.vqa_accuracy import VQAScores
from keras_structattn.metrics.vqa_accuracy import evaluate_vqa
from keras_structattn.metrics.vqa_accuracy import prepare_answer
from keras_structattn.metrics.vqa_accuracy import process_digit_article
from keras_structattn.metrics.vqa_accuracy import process_punctuation
from keras_structattn.metrics.vqa_accuracy import vqa_accuracy
from keras_structattn.metrics.vqa_accuracy import write_vqa_scores_json
