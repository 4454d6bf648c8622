"""Evaluation metrics.

text: corpus BLEU and chrF through sacreBLEU, with a variable number of
references per segment.

COCO captions (pycocoevalcap 1.2's definitions, `docs/caption_metrics.md`):
ptb_tokenizer (its Stanford PTB tokenisation, in Python), caption_scores
(BLEU-1..4, ROUGE-L, CIDEr-D, and `CiderD`, the self-critical reward),
java_scorers (METEOR and SPICE through its jars, when Java is there) and
coco_caption (`evaluate_captions` on the official file formats).
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
