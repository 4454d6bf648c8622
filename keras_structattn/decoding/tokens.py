"""The reserved token ids, defined once for the whole library.

tensor2tensor's convention: id 0 is padding and also the decoder's start
symbol (targets are shifted right with a 0; there is no BOS), id 1 ends a
sentence (EOS), id 2 stands for an unknown piece (UNK). The vocabularies
(`keras_structattn.data`), the data pipelines, the models and the decoders
(`keras_structattn.decoding`) import them from here.
"""

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
