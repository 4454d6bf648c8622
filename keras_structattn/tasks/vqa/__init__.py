"""Visual question answering data (VQA v2).

Modules:
    vqa: VQA v2 questions, annotations and results, MCAN's question
        tokenizer, `AnswerVocab` and soft-score targets.
    report: the accuracy tables, the bias-conflict split, the majority
        baseline and the attention picture of an answer.

The scores are `keras_structattn.metrics.vqa_accuracy`.
"""

from keras_structattn.tasks.vqa.vqa import AnswerVocab
from keras_structattn.tasks.vqa.vqa import VQARecord
from keras_structattn.tasks.vqa.vqa import question_batch
from keras_structattn.tasks.vqa.vqa import read_vqa
from keras_structattn.tasks.vqa.vqa import read_vqa_results
from keras_structattn.tasks.vqa.vqa import records_report
from keras_structattn.tasks.vqa.vqa import soft_score_batch
from keras_structattn.tasks.vqa.vqa import soft_scores
from keras_structattn.tasks.vqa.vqa import tokenize_question
