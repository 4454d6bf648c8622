"""Task data and task helpers, one subpackage per task.

Subpackages:
    translation: parallel text, the embedded Tatoeba corpus, bucketed
        `tf.data` batches, recorded batches, and `translate_sentences`.
    captioning: COCO / Karpathy caption files, caption id batches, score
        tables and attention pictures.
    vqa: VQA v2 questions, annotations, answer vocabulary and soft scores.
    textvqa: the mmf TextVQA imdb, M4C's answer words and targets, PHOC.
    grounding: RefCOCO refs, grounding targets and accuracy, and the
        grounding heads' losses and box selection.

Modules:
    attention_maps: pictures of attention over an image (areas per word,
        regions, quadrants), for the vision-and-language tasks.
    run_of_three: the area attention demo's toy task (data and a small
        classifier).

The data shared by several tasks (feature stores, vocabularies, JSON files,
ShapesWorld) is in `keras_structattn.data`; the scores in
`keras_structattn.metrics`.
"""
