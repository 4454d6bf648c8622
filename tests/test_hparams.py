"""`HParams.parse`: overrides split at `,name=`, so list values survive."""

import pytest

from keras_structattn.training.hparams import HParams
from models import registry

DEFAULTS = HParams(
    num_heads=4, dropout=0.1, shared=True, kinds="encoder_self,decoder_self,encdec", mode="mean"
)


def test_list_valued_override_is_one_value():
    hp = DEFAULTS.parse("num_heads=2,kinds=encoder_self,encdec,mode=max")
    assert hp.num_heads == 2
    assert hp.kinds == "encoder_self,encdec"
    assert hp.mode == "max"
    # Spaces around the separating commas, empty items and a trailing comma.
    hp = DEFAULTS.parse(" kinds = encdec , decoder_self ,, num_heads=3,")
    assert hp.kinds == "encdec , decoder_self" and hp.num_heads == 3


def test_area_attention_kinds_from_the_command_line():
    from models.translation.transformer import area_kinds

    hp = registry.resolve(
        "transformer_tiny", "num_area_layers=1,area_attention_kinds=encoder_self,encdec"
    )
    assert hp.num_area_layers == 1
    assert area_kinds(hp.area_attention_kinds) == ("encoder_self", "encdec")


def test_unknown_name_is_still_an_error():
    with pytest.raises(ValueError, match="Unknown hyper-parameter 'hiden_size'"):
        DEFAULTS.parse("kinds=encdec,hiden_size=3")
    with pytest.raises(ValueError, match="Unknown hyper-parameter 'hiden_size'"):
        DEFAULTS.parse("hiden_size=3")


def test_items_without_a_name():
    with pytest.raises(ValueError, match="'num_heads': expected name=value"):
        DEFAULTS.parse("num_heads")
    with pytest.raises(ValueError, match="'oops': expected name=value"):
        DEFAULTS.parse("oops,num_heads=2")
    # A comma-separated value only goes to a string hyper-parameter.
    with pytest.raises(ValueError, match=r"'num_heads=2,3'.*'num_heads' is an int.*string"):
        DEFAULTS.parse("num_heads=2,3")
    with pytest.raises(ValueError, match="given twice"):
        DEFAULTS.parse("num_heads=2,num_heads=3")


def test_type_messages_use_the_right_article():
    with pytest.raises(ValueError, match="'num_heads' is an int; received 'two'"):
        DEFAULTS.parse("num_heads=two")
    with pytest.raises(ValueError, match="'num_heads' is an int; received 2.5"):
        DEFAULTS.override(num_heads=2.5)
    with pytest.raises(ValueError, match="'dropout' is a float; received 'x'"):
        DEFAULTS.parse("dropout=x")
    with pytest.raises(ValueError, match="'shared' is a bool"):
        DEFAULTS.parse("shared=maybe")
    with pytest.raises(ValueError, match="'mode' is a str; received 3"):
        DEFAULTS.override(mode=3)
    # A bool is not a number: True does not become 1.0.
    with pytest.raises(ValueError, match="'dropout' is a float; received True"):
        DEFAULTS.override(dropout=True)
    assert DEFAULTS.override(dropout=1).dropout == 1.0
