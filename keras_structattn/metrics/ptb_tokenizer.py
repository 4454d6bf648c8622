"""The PTB tokenisation of the COCO caption evaluation, in pure Python.

pycocoevalcap 1.2 (`pycocoevalcap.tokenizer.ptbtokenizer`) writes every
caption to a file, one per line, runs the Stanford PTBTokenizer of CoreNLP
3.4.1 on it (`java edu.stanford.nlp.process.PTBTokenizer -preserveLines
-lowerCase`), splits the output back into lines and drops a list of
punctuation tokens. This module gives the same strings without Java: a
longest-match lexer over the same token classes, in the same rule order (the
first rule wins a tie, as in a JFlex scanner), with the same normalisations
(`(` -> `-LRB-`, `"` -> `` `` `` or `''`, `n't` split off, ...), then
lower-casing and the same punctuation filter. It was checked string by
string against the Java tokenizer (`docs/caption_metrics.md`).

Line separators are the one deliberate difference. Java ends a line at
`\\r`, `\\n`, U+000B, U+000C, U+2028 and U+2029, so in pycocoevalcap a
caption holding one of them becomes two lines and every later caption of the
batch is given to the wrong image. Here they are spaces, so each caption is
one line by construction.

Everything else is kept, down to the trailing-context rules that look past
the end of a caption into the next one, as Java does: `etc.` before a line
that starts with a capital letter, or at the very end of the input, is
`etc.` `.`; `'12` before a line break is one token, at the end of the input
two. So `tokenize_captions` gives pycocoevalcap's batch result exactly, and
a caption tokenised alone (`ptb_tokenize`) is the last line of its input.

Strings are lexed as UTF-16 code units, as Java sees them: a character
outside the Basic Multilingual Plane (an emoji) is two surrogates that no
token class holds, so it is deleted, as Java deletes it. Lower-casing is
`str.lower`, which can differ from Java's `String.toLowerCase` on a Greek
capital sigma inside a token (`L2Σ`: Java `l2ς`, here `l2σ`).
"""

import re

from keras_structattn.metrics import ptb_chars

# pycocoevalcap's PUNCTUATIONS. The bracket names are upper case there while
# the tokens are lower-cased before the comparison, so `-lrb-` and friends
# stay in the captions; that is the reference behaviour.
PUNCTUATION = frozenset(
    ["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":",
     "-", "--", "...", ";"]
)

# Java's line terminators for the tokenizer (its NEWLINE class: \r, \n,
# \r\n, U+000B, U+000C, U+0085, U+2028, U+2029). U+0085 is lexed as the
# CP1252 ellipsis before it can end a line, so it never shifts lines in
# Java; it is a space here all the same (its "..." token is punctuation that
# pycocoevalcap drops).
LINE_SEPARATORS = "\r\n\x0b\x0c\x85\u2028\u2029"
_LINE_SEPARATOR_TABLE = {ord(c): " " for c in LINE_SEPARATORS}


def _ci(literal):
    """A literal matched without case, as JFlex's %caseless does for strings
    (but not for character classes, which the rules below spell out)."""
    out = []
    for c in literal:
        if c.lower() != c.upper():
            out.append(f"[{c.lower()}{c.upper()}]")
        else:
            out.append(re.escape(c))
    return "".join(out)


def _alt(*literals):
    return "(?:" + "|".join(_ci(w) for w in literals) + ")"


# [:letter:] and [:digit:] of the scanner, on UTF-16 code units (surrogates
# are neither), in the Unicode version it was built with (`ptb_chars`).
_L = ptb_chars.char_class(ptb_chars.LETTERS)
_D = ptb_chars.char_class(ptb_chars.DIGITS)
LETTER = f"[{_L}]"
DIGIT = f"[{_D}]"
LETTER_OR_DIGIT = f"[{_L}{_D}]"

SPACE = "[ \\t\\u00a0\\u2000-\\u200a\\u3000]"
SPACES = SPACE + "+"
NEWLINE = "(?:\\r?\\n|\\r|\\u2028|\\u2029|\\x0b|\\x0c|\\x85)"
SPACENL = f"(?:{SPACE}|{NEWLINE})"
SGML = (
    "<(?:[!?][A-Za-z-][^>\\r\\n]*"
    "|[A-Za-z][A-Za-z0-9_:.-]*"
    "(?:[ ]+(?:[A-Za-z][A-Za-z0-9_:.-]*[ ]*=[ ]*(?:'[^']*'|\"[^\"]*\")"
    "|[A-Za-z][A-Za-z0-9_:.-]*))*[ ]*/?"
    "|/[A-Za-z][A-Za-z0-9_:.-]*)[ ]*>"
)
UPPERCASE = f"[{ptb_chars.char_class(ptb_chars.UPPERCASE)}]"
SENTEND = f"{SPACENL}(?:{SPACENL}|{UPPERCASE}|{SGML})"
SPMDASH = f"(?:&{_alt('MD', 'mdash', 'ndash')};|[\\x96\\x97\\u2013\\u2014\\u2015])"
SPAMP = "&" + _ci("amp") + ";"
SPPUNC = "&(?:" + "|".join(_ci(w) for w in
                           ("HT", "TL", "UR", "LR", "QC", "QL", "QR", "odq", "cdq")) + "|#[0-9]+);"
SPLET = f"&[aeiouAEIOU]{_alt('acute', 'grave', 'uml')};"
APOS = "(?:['\\x92\\u2019]|&" + _ci("apos") + ";)"
APOSETCETERA = f"(?:{APOS}|[`\\x91\\u2018\\u201b])"
HYPHEN = "[-_\\u058a\\u2010\\u2011]"
# Letters that [:letter:] misses (combining marks, modifier letters, ...),
# and the soft hyphen, which a word then loses.
_LETTER_EXTRA = (
    "\\u00ad\\u0237-\\u024f\\u02c2-\\u02c5\\u02d2-\\u02df\\u02e5-\\u02ff\\u0300-\\u036f"
    "\\u0370-\\u037d\\u0384\\u0385\\u03cf\\u03f6\\u03fc-\\u03ff\\u0483-\\u0487\\u04cf"
    "\\u04f6-\\u04ff\\u0510-\\u0525\\u055a-\\u055f\\u0591-\\u05bd\\u05bf\\u05c1\\u05c2"
    "\\u05c4\\u05c5\\u05c7\\u0615-\\u061a\\u063b-\\u063f\\u064b-\\u065e\\u0670"
    "\\u06d6-\\u06ef\\u06fa-\\u06ff\\u070f\\u0711\\u0730-\\u074f\\u0750-\\u077f"
    "\\u07a6-\\u07b1\\u07ca-\\u07f5\\u07fa\\u0900-\\u0903\\u093c\\u093e-\\u094e"
    "\\u0951-\\u0955\\u0962-\\u0963\\u0981-\\u0983\\u09bc-\\u09c4\\u09c7\\u09c8"
    "\\u09cb-\\u09cd\\u09d7\\u09e2\\u09e3\\u0a01-\\u0a03\\u0a3c\\u0a3e-\\u0a4f"
    "\\u0a81-\\u0a83\\u0abc-\\u0acf\\u0b82\\u0bbe-\\u0bc2\\u0bc6-\\u0bc8\\u0bca-\\u0bcd"
    "\\u0c01-\\u0c03\\u0c3e-\\u0c56\\u0d3e-\\u0d44\\u0d46-\\u0d48\\u0e30-\\u0e3a"
    "\\u0e47-\\u0e4e\\u0eb1-\\u0ebc\\u0ec8-\\u0ecd"
)
WORD_LETTER = f"(?:[{_L}{_LETTER_EXTRA}]|{SPLET})"
_WORD_PART = f"{WORD_LETTER}(?:{WORD_LETTER}|{DIGIT})*"
# Words may hold inner periods, ! and ? ("e.g", "Yahoo!x").
WORD = f"{_WORD_PART}(?:[.!?]{_WORD_PART})*"
REDAUX = f"{APOS}(?:[msdMSD]|{_alt('re', 've', 'll')})"
SWORD = "[A-Za-z\\u00ad]*[A-MO-Za-mo-z]\\u00ad*"
SREDAUX = _ci("n") + APOSETCETERA + _ci("t")
_THING_PART = f"(?:[dDoOlL]{APOSETCETERA}{LETTER_OR_DIGIT})?{LETTER_OR_DIGIT}+"
THING = f"{_THING_PART}(?:{HYPHEN}{_THING_PART})*"
THINGA = f"[A-Z]+(?:(?:{SPAMP}|[+&])[A-Z]+)+"
THING3 = "[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}"
NUM = f"(?:{DIGIT}*(?:[.:,\\u00ad\\u066b\\u066c]{DIGIT}+)+|{DIGIT}+)"
NUMBER = f"[-+]?{NUM}"
DATE = f"{DIGIT}{{1,2}}[-/]{DIGIT}{{1,2}}[-/]{DIGIT}{{2,4}}"
SUBSUPNUM = ("[\\u207a\\u207b\\u208a\\u208b]?(?:[\\u2070\\u00b9\\u00b2\\u00b3\\u2074-\\u2079]+"
             "|[\\u2080-\\u2089]+)")
FRAC = f"(?:{DIGIT}{{1,4}}[- \\u00a0])?{DIGIT}{{1,4}}(?:\\\\?/|\\u2044){DIGIT}{{1,4}}"
FRAC2 = "[\\u00bc\\u00bd\\u00be\\u2153-\\u215e]"
DOLSIGN = "(?:[A-Z]*\\$|#)"
DOLSIGN2 = ("[\\u00a2\\u00a3\\u00a4\\u00a5\\x80\\u20a0\\u20ac\\u060b\\u0e3f\\u20a4\\uffe0"
            "\\uffe1\\uffe5\\uffe6]")
_ACRO_SPECIAL = (f"{_ci('U.S.-')}(?:{_ci('U.S.S.R')}|{_ci('U.K')})"
                 f"|{_alt('Canada', 'Sino', 'Korean', 'EU', 'Japan', 'non')}-{_ci('U.S')}")
# A letter, or letters joined by periods ("I", "U.S"); ACRO2 needs a period.
ACRO = f"(?:{_ACRO_SPECIAL}|[A-Za-z](?:\\.[A-Za-z])*)"
ACRO2 = f"(?:{_ACRO_SPECIAL}|[A-Za-z](?:\\.[A-Za-z])+)"
ACRONYM = ACRO + "\\."


def _words(*words):
    """Caseless alternatives, longest first (Python takes the first that
    fits, JFlex the longest); a leading "[X]" is a case-sensitive capital."""
    out = []
    for w in sorted(words, key=len, reverse=True):
        if w.startswith("[") and w[2] == "]":
            out.append(w[1] + _ci(w[3:]))
        else:
            out.append(_ci(w))
    return "(?:" + "|".join(out) + ")"


_ABMONTH = ("Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec")
_ABDAYS = ("Mon", "Tue", "Tues", "Wed", "Thu", "Thurs", "Fri")
# A bracketed capital ([A]rk) is case sensitive: those are also common words.
_ABSTATE = ("Ala", "Ariz", "[A]z", "[A]rk", "Calif", "Colo", "Conn", "Ct", "Dak", "[D]el", "Fla",
            "Ga", "[I]ll", "Ind", "Kans", "Kan", "Ky", "[L]a", "[M]ass", "Md", "Mich", "Minn",
            "[M]iss", "Mo", "Mont", "Neb", "Nev", "Okla", "[O]re", "[P]a", "Penn", "Tenn",
            "[T]ex", "Va", "Vt", "[W]ash", "Wisc", "Wis", "Wyo")
_ABCOMP = ("Inc", "Cos", "Co", "Corp", "Pptys", "Ppty", "Ptys", "Pty", "Ptes", "Pte", "Pptes",
           "Ppte", "Ltd", "Plc", "Rt", "Bancorp", "Bhd", "Assn", "Univ", "Intl", "Sys")
_ABNUM = ("tel", "est", "ext", "sq")
_ABPTIT = ("Jr", "Sr", "Bros", "Ed.D", "Ph.D", "Blvd", "Rd", "Esq")
# Abbreviations usually followed by a lower-case word: before a capital (or
# at the end of the input) the period also ends the sentence.
ABBREV1 = _words(*_ABMONTH, *_ABDAYS, *_ABSTATE, *_ABCOMP, *_ABNUM, *_ABPTIT, "etc", "al",
                 "seq", "Bldg") + "\\."
_ABTITLE = ("Mr", "Mrs", "Ms", "[M]iss", "Drs", "Dr", "Profs", "Prof", "Sens", "Sen", "Reps",
            "Rep", "Attys", "Atty", "Lt", "Col", "Gen", "Messrs", "Govs", "Gov", "Adm", "Rev",
            "Maj", "Sgt", "Cpl", "Pvt", "Capt", "Ste", "St", "Ave", "Pres", "Lieut", "Hon",
            "Brig", "Comdr", "Cmdr", "Pfc", "Spc", "Supts", "Supt", "Det", "Mt", "Ft", "Adj",
            "Adv", "Asst", "Assoc", "Ens", "Insp", "Mlle", "Mme", "Msgr", "Sfc")
_ABCOMP2 = ("Invt", "Elec", "Natl", "Mfg", "Mtg", "Dept")
# Abbreviations usually followed by a capitalised word (never sentence final).
# (ACRO first: when it fits, it is at least as long as the others.)
ABBREV4 = (f"(?:{ACRO}|"
           + _words(*_ABTITLE, *_ABCOMP2, "vs", "Alex", "Wm", "Jos", "Cie", "a.k.a", "cf", "TREAS",
                    "Ph") + ")")
ABBREV2 = ABBREV4 + "\\."
# Abbreviations only before a number ("No. 5", "fig.3").
ABBREV3 = _words("ca", "figs", "fig", "prop", "nos", "no", "art", "pp", "op") + "\\."
# An acronym before one of these words ends the sentence too.
_ACRONYM_NEXT = _words(
    "[A]bout", "[A]ccording", "[A]dditionally", "[A]fter", "[A]n", "[A]", "[A]s", "[A]t", "[B]ut",
    "[E]arlier", "[H]e", "[H]er", "[H]ere", "[H]owever", "[I]f", "[I]n", "[I]t", "[L]ast",
    "[M]any", "[M]ore", "[M]r.", "[M]s.", "[N]ow", "[O]nce", "[O]ne", "[O]ther", "[O]ur", "[S]he",
    "[S]ince", "[S]o", "[S]ome", "[S]uch", "[T]hat", "[T]he", "[T]heir", "[T]hen", "[T]here",
    "[T]hese", "[T]hey", "[T]his", "[W]e", "[W]hen", "[W]hile", "[W]hat", "[Y]et", "[Y]ou")
FULLURL = _ci("http") + "[sS]?://[^ \\t\\n\\f\\r\"<>|(){}]+[^ \\t\\n\\f\\r\"<>|.!?(){},-]"
_URL_PATH = "(?:/[^ \\t\\n\\f\\r\"<>|()]+[^ \\t\\n\\f\\r\"<>|.!?(){},-])?"
LIKELYURL_WWW = (_ci("www") + "\\.(?:[^ \\t\\n\\f\\r\"<>|.!?(){},]+\\.)+[a-zA-Z]{2,4}"
                 + _URL_PATH)
# `,-_` in the Java class is a range (U+002C to U+005F: digits, capitals,
# `./:;<=>?@[\\]^`), kept as it is.
LIKELYURL_TLD = ("(?:[^ \\t\\n\\f\\r\"`'<>|.!?(){}\\x2c-\\x5f$]+\\.)+"
                 + _words("com", "net", "org", "edu") + _URL_PATH)
EMAIL = ("(?:&" + _ci("lt") + ";|<)?[a-zA-Z0-9][^ \\t\\n\\f\\r\"<>|(){}\\u00a0]*@"
         "(?:[^ \\t\\n\\f\\r\"<>|(){}.\\u00a0]+\\.)*[^ \\t\\n\\f\\r\"<>|(){}.\\u00a0]+"
         "(?:&" + _ci("gt") + ";|>)?")
_FILENAME_EXT = _words(
    "bat", "bmp", "c", "class", "cgi", "cpp", "dll", "doc", "docx", "exe", "gif", "gz", "h",
    "htm", "html", "jar", "java", "jpeg", "jpg", "mov", "mp3", "pdf", "php", "pl", "png", "ppt",
    "ps", "py", "sql", "tar", "txt", "wav", "x", "xml", "zip")
FILENAME = f"{LETTER_OR_DIGIT}+(?:\\.{LETTER_OR_DIGIT}+)*\\.{_FILENAME_EXT}"
TWITTER = f"(?:@[a-zA-Z_][a-zA-Z_0-9]*|#{WORD_LETTER}+)"
PHONE = ("(?:(?:\\([0-9]{2,3}\\)[ \\u00a0]?|(?:\\+\\+?)?(?:[0-9]{2,4}[- \\u00a0])?[0-9]{2,4}"
         "[- \\u00a0])[0-9]{3,4}[- \\u00a0]?[0-9]{3,5}"
         "|(?:(?:\\+\\+?)?[0-9]{2,4}\\.)?[0-9]{2,4}\\.[0-9]{3,4}\\.[0-9]{3,5})")
LDOTS = "(?:\\.{3,5}|(?:\\.[ \\u00a0]){2,4}\\.|[\\x85\\u2026])"
INSENTP = "[,;:\\u3001]"
QUOTE_CHARS = ("[`\\u2018\\u2019\\u201a\\u201b\\u201c\\u201d\\x91\\x92\\x93\\x94\\u201e\\u201f"
               "\\u2039\\u203a\\u00ab\\u00bb]")
DBLQUOT = "(?:\"|&" + _ci("quot") + ";)"
TBSPEC = ("(?:-" + _words("RRB", "LRB", "RCB", "LCB", "RSB", "LSB") + "-|" + _ci("C.D.s") + "|"
          + _ci("pro-") + "|" + _ci("anti-") + "|" + _ci("S") + "(?:&|" + SPAMP + ")"
          + _ci("P-500") + "|" + _ci("S") + "(?:&|" + SPAMP + ")" + _ci("Ls") + "|"
          + _ci("Cap") + APOS + _ci("n") + "|" + _ci("c") + APOS + _ci("est") + ")")
TBSPEC2 = APOS + "[0-9][0-9]"
SMILEY = "[<>]?[:;=][-o*']?[()DPdpO\\\\{@|\\[\\]]"
ASIANSMILEY = ("(?:[-^x=~<>']_[-^x=~<>']|\\([-^x=~<>'][_.]?[-^x=~<>']\\)"
               "|\\([\\^x=~<>']-[\\^x=~<>'`]\\))")
PROG_LANGS = "(?:" + _ci("c++") + "|[cCfF]#)"
MISCSYMBOL = (
    "[+%&~^|\\\\\\u00a6\\u00a7\\u00a8\\u00a9\\u00ac\\u00ae\\u00af\\u00b0-\\u00b3\\u00b4-\\u00ba"
    "\\u00d7\\u00f7\\u0387\\u05be\\u05c0\\u05c3\\u05c6\\u05f3\\u05f4\\u0600-\\u0603"
    "\\u0606-\\u060a\\u060c\\u0614\\u061b\\u061e\\u066a\\u066d\\u0703-\\u070d\\u07f6-\\u07f8"
    "\\u0964\\u0965\\u0e4f\\u1fbd\\u2016\\u2017\\u2020-\\u2023\\u2030-\\u2038\\u203b"
    "\\u203e-\\u2042\\u2044\\u207a-\\u207f\\u208a-\\u208e\\u2100-\\u214f\\u2190-\\u21ff"
    "\\u2200-\\u2bff\\u3012\\u30fb\\uff01-\\uff0f\\uff1a-\\uff20\\uff3b-\\uff40\\uff5b-\\uff65]"
)


# --------------------------------------------------------------------------
# Token normalisations (PTB3 escaping, the defaults of CoreNLP 3.4.1; no
# americanize, no escaping of / and *).

def _remove_soft_hyphens(text):
    return text.replace("\u00ad", "") or "-"


def _spaces_to_nbsp(text):
    return text.replace(" ", "\u00a0")


def _normalize_amp(text):
    return re.sub("&" + _ci("amp") + ";", "&", text)


_FRACTIONS = {"\u00bc": "1/4", "\u00bd": "1/2", "\u00be": "3/4", "\u2153": "1/3", "\u2154": "2/3"}
_CURRENCY = {"\u00a2": "cents", "\u00a3": "#", "\x80": "$", "\u00a4": "$", "\u20a0": "$",
             "\u20ac": "$"}


def _latex_quotes(text, probably_left):
    """LaTeX-style quotes: ` and `` open, ' and '' close. (The entities are
    case sensitive here, unlike in the scanner: `&APOS;s` stays as it is.)"""
    if probably_left:
        text = re.sub("&apos;|'", "`", text)
        text = re.sub("\"|&quot;", "``", text)
    else:
        text = re.sub("&apos;|'", "'", text)
        text = re.sub("\"|&quot;", "''", text)
    text = re.sub("[\x91\u2018\u201b\u2039]", "`", text)
    text = re.sub("[\x92\u2019\u203a]", "'", text)
    text = re.sub("[\x93\u201c\u00ab]", "``", text)
    return re.sub("[\x94\u201d\u00bb]", "''", text)


def _left_quote(text):
    return _latex_quotes(text, True)


def _right_quote(text):
    return _latex_quotes(text, False)


def _dashes(text):
    return "--" if 3 <= len(text) <= 4 else text


def _phone(text):
    return _spaces_to_nbsp(text).replace("(", "-LRB-").replace(")", "-RRB-")


def _parentheses(text):
    return text.replace("(", "-LRB-").replace(")", "-RRB-")


def _keep(text):
    return text


_SKIP = None  # whitespace and characters no token class holds: no token
_LINE = "\n"  # a line break: the end of one caption


class _Rule:
    """One scanner rule: `pattern` matches the token and its trailing context
    (the part after the group `tok`, if any), `action` maps the token text to
    the output token (or `_SKIP`), `keep` how many characters of the token
    are consumed (the rest is scanned again, as JFlex's yypushback)."""

    __slots__ = ("name", "patterns", "action", "keep")

    def __init__(self, name, patterns, action=_keep, keep=None):
        self.name = name
        if isinstance(patterns, str):
            patterns = [patterns]
        self.patterns = [re.compile(p if "(?P<tok>" in p else f"(?P<tok>{p})")
                         for p in patterns]
        self.action = action
        self.keep = keep


_ASSIMILATIONS = ("cannot", "gonna", "gotta", "lemme", "gimme", "wanna")


def _trail(token, context):
    return f"(?P<tok>{token}){context}"


def _acronym_keep(token):
    # "U.S." stays whole and its period is scanned again (it ends the
    # sentence too); a lone "I." gives "I" and then ".".
    return len(token) - 1


def _acronym_text(token):
    return token[:-1] if len(token) == 2 else token


_HTHING_START = "[A-Za-z0-9][A-Za-z0-9.,\\u00ad]*"
_HTHING = f"{_HTHING_START}(?:-(?:{ACRO2}\\.|[A-Za-z0-9\\u00ad]+))+"

# The rules in the scanner's order: the longest match wins, and the first
# rule wins a tie. A rule with several patterns matches as long as the
# longest of them.
_RULES = [
    _Rule("prog_langs", PROG_LANGS),
    # "cannot" -> "can" "not", "'twas" -> "'t" "was", "gonna" -> "gon" "na".
    _Rule("assimilation3", _words("cannot", "'twas"), lambda tok: tok[:-3],
          keep=lambda tok: len(tok) - 3),
    _Rule("assimilation2", _words("'tis", "gonna", "gotta", "lemme", "gimme", "wanna"),
          lambda tok: tok[:-2], keep=lambda tok: len(tok) - 2),
    _Rule("sgml", SGML, _spaces_to_nbsp),
    _Rule("spmdash", SPMDASH, lambda t: "--"),
    _Rule("spamp", SPAMP, _normalize_amp),
    _Rule("sppunc", SPPUNC),
    _Rule("word_redaux", _trail(WORD, REDAUX), _remove_soft_hyphens),
    _Rule("sword_sredaux", _trail(SWORD, SREDAUX), _remove_soft_hyphens),
    _Rule("word", WORD, _remove_soft_hyphens),
    _Rule("apoword", [
        f"{APOS}{_ci('n')}(?:{APOS})?",
        f"[lLdDjJ]{APOS}",
        f"{_words('Dunkin', 'somethin', 'ol')}{APOS}",
        f"{APOS}{_ci('em')}",
        f"[A-HJ-XZn]{APOSETCETERA}{LETTER}{{2}}{LETTER}*",
        f"{APOS}[2-9]0{_ci('s')}",
        f"{APOS}{_ci('til')}{_ci('l')}?",
        f"{LETTER}+[aeiouyAEIOUY]{APOSETCETERA}[aeiouA-Z]{LETTER}*",
        f"{APOS}{_ci('cause')}",
        _ci("cont'd") + "\\.?",
        _words("nor'easter", "c'mon", "e'er", "s'mores", "ev'ry", "li'l", "nat'l"),
        f"{_ci('o')}{APOSETCETERA}{_ci('o')}",
    ]),
    _Rule("apoword2", _trail(_ci("y") + APOS, LETTER)),
    _Rule("fullurl", FULLURL),
    _Rule("likelyurl", [LIKELYURL_WWW, LIKELYURL_TLD]),
    _Rule("email", EMAIL),
    _Rule("twitter", TWITTER),
    _Rule("redaux_nonletter", _trail(REDAUX, "[^A-Za-z]"), _right_quote),
    _Rule("sredaux", SREDAUX, _right_quote),
    _Rule("date", DATE),
    _Rule("number", NUMBER, _remove_soft_hyphens),
    _Rule("subsupnum", SUBSUPNUM),
    _Rule("frac", FRAC, _spaces_to_nbsp),
    _Rule("frac2", FRAC2, lambda t: _FRACTIONS.get(t, t)),
    _Rule("tbspec", TBSPEC, _normalize_amp),
    _Rule("thing3", THING3),
    _Rule("dolsign", DOLSIGN),
    _Rule("dolsign2", DOLSIGN2, lambda t: _CURRENCY.get(t, t)),
    # An acronym before one of these words ends the sentence too.
    _Rule("acronym_sentend",
          _trail(ACRONYM, f"{SPACENL}+(?:{_ACRONYM_NEXT}|{SGML}){SPACENL}"),
          _acronym_text, keep=_acronym_keep),
    _Rule("abbrev3_number", _trail(ABBREV3, f"{SPACENL}?{DIGIT}")),
    _Rule("abbrev1_sentend", _trail(ABBREV1, SENTEND), keep=lambda tok: len(tok) - 1),
    # Followed by two more characters of any kind (newlines included): an
    # abbreviation inside the sentence.
    _Rule("abbrev1_inside", _trail(ABBREV1, "[\\s\\S]{2}")),
    # Otherwise it is at the end of the input: the period ends the sentence.
    _Rule("abbrev1_end", ABBREV1, keep=lambda tok: len(tok) - 1),
    _Rule("abbrev2", ABBREV2),
    _Rule("abbrev4_space", _trail(ABBREV4, SPACE)),
    _Rule("acro_spacenl", _trail(ACRO, SPACENL)),
    _Rule("tbspec2_spacenl", _trail(TBSPEC2, SPACENL)),
    _Rule("filename", _trail(FILENAME, f"(?:{SPACENL}|[.?!,])")),
    _Rule("word_period_insentp", _trail(WORD + "\\.", INSENTP), _remove_soft_hyphens),
    _Rule("phone", PHONE, _phone),
    _Rule("dblquot_left", _trail(DBLQUOT, "[A-Za-z0-9$]"), _left_quote),
    _Rule("dblquot", DBLQUOT, _right_quote),
    _Rule("delete_char", "\x7f", lambda t: _SKIP),
    _Rule("lessthan", "<|&" + _ci("lt") + ";", lambda t: "<"),
    _Rule("greaterthan", ">|&" + _ci("gt") + ";", lambda t: ">"),
    _Rule("smiley", _trail(SMILEY, "[^A-Za-z0-9]"), _parentheses),
    _Rule("asiansmiley", ASIANSMILEY, _parentheses),
    _Rule("lcb", "\\{", lambda t: "-LCB-"),
    _Rule("rcb", "\\}", lambda t: "-RCB-"),
    _Rule("lsb", "\\[", lambda t: "-LSB-"),
    _Rule("rsb", "\\]", lambda t: "-RSB-"),
    _Rule("lrb", "\\(", lambda t: "-LRB-"),
    _Rule("rrb", "\\)", lambda t: "-RRB-"),
    _Rule("hyphens", "-+", _dashes),
    _Rule("ldots", LDOTS, lambda t: "..."),
    _Rule("fnmarks", ["@+", "#+", "_+"]),
    _Rule("asts", ["\\*+", "(?:\\\\\\*){1,3}"]),
    _Rule("insentp", INSENTP),
    _Rule("exclamations", "[?!]+"),
    _Rule("sentence_punct", "[.\u00a1\u00bf\u037e\u0589\u061f\u06d4\u0700-\u0702\u07fa\u3002]"),
    _Rule("equals", "="),
    _Rule("slash", "/"),
    _Rule("hthing_period_insentp", _trail(_HTHING + "\\.", INSENTP), _remove_soft_hyphens),
    _Rule("hthing", _HTHING, _remove_soft_hyphens),
    _Rule("thing_period_insentp", _trail(THING + "\\.", INSENTP)),
    _Rule("thing", THING),
    _Rule("thinga_period_insentp", _trail(THINGA + "\\.", INSENTP), _normalize_amp),
    _Rule("thinga", THINGA, _normalize_amp),
    # An apostrophe before a letter and a non-space: probably an opening quote.
    _Rule("left_quote", _trail("'", "[A-Za-z][^ \\t\\n\\r\\u00a0]"), _left_quote),
    _Rule("redaux", REDAUX, _right_quote),
    _Rule("quotes", [APOS, "''", QUOTE_CHARS + "{1,2}"], _right_quote),
    _Rule("fakeduckfeet", "<<|>>"),
    _Rule("miscsymbol", MISCSYMBOL),
    _Rule("space", "\\x00|" + SPACES + "|[\\u200b\\u200e\\u200f\\ufeff]", lambda t: _SKIP),
    _Rule("newline", NEWLINE, lambda t: _LINE),
    _Rule("nbsp_entity", "&" + _ci("nbsp") + ";", lambda t: _SKIP),
    _Rule("untokenizable", "[\\s\\S]", lambda t: _SKIP),
]

# Most of a caption is plain ASCII words before a space: no rule makes more
# of them than the word itself, except the assimilations.
_FAST_WORD = re.compile("[A-Za-z]+(?=[ \\t\\n]|$)")
_FAST_EXCEPTIONS = frozenset(_ASSIMILATIONS)
# A run of spaces that starts with a space or a tab: only the space rule (and
# the one-character catch-all) can start there. (A likely URL can start with
# a no-break space.)
_FAST_SPACES = re.compile(f"[ \\t]{SPACE}*")


def _first_char_pattern(pattern):
    """A regex matching every character that can start a match of `pattern`
    (a superset), or None when that cannot be worked out (then any can).

    This only narrows down which rules are tried at a position: a rule that
    is left out could not have matched there, so the result never changes.
    It reads the parse tree of Python's `re`, a private module; anything it
    does not know makes it answer None.
    """
    try:
        from re import _constants as sre
        from re import _parser as sre_parse
    except ImportError:  # Python < 3.11
        try:
            import sre_constants as sre
            import sre_parse
        except ImportError:
            return None
    categories = {
        sre.CATEGORY_DIGIT: "\\d", sre.CATEGORY_NOT_DIGIT: "\\D", sre.CATEGORY_SPACE: "\\s",
        sre.CATEGORY_NOT_SPACE: "\\S", sre.CATEGORY_WORD: "\\w", sre.CATEGORY_NOT_WORD: "\\W",
    }

    class Unknown(Exception):
        pass

    def char(code):
        return "\\u%04x" % code if code <= 0xFFFF else "\\U%08x" % code

    def in_class(items):
        body = []
        for op, av in items:
            if op is sre.NEGATE:
                body.insert(0, "^")
            elif op is sre.LITERAL:
                body.append(char(av))
            elif op is sre.RANGE:
                body.append(char(av[0]) + "-" + char(av[1]))
            elif op is sre.CATEGORY and av in categories:
                body.append(categories[av])
            else:
                raise Unknown(op)
        return "[" + "".join(body) + "]"

    def sequence(items):
        # (first-character regexes, whether the sequence can match "")
        firsts = []
        for op, av in items:
            first, nullable = item(op, av)
            firsts += first
            if not nullable:
                return firsts, False
        return firsts, True

    def item(op, av):
        if op is sre.LITERAL:
            return [char(av)], False
        if op is sre.NOT_LITERAL:
            return ["[^" + char(av) + "]"], False
        if op is sre.ANY:
            return ["[\\s\\S]"], False
        if op is sre.IN:
            return [in_class(av)], False
        if op is sre.SUBPATTERN:
            if av[1] or av[2]:  # inline flags
                raise Unknown(op)
            return sequence(av[-1])
        if op is sre.BRANCH:
            firsts, nullable = [], False
            for branch in av[1]:
                first, empty = sequence(branch)
                firsts += first
                nullable = nullable or empty
            return firsts, nullable
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
            first, nullable = sequence(av[2])
            return first, nullable or av[0] == 0
        raise Unknown(op)

    try:
        firsts, nullable = sequence(sre_parse.parse(pattern).data)
    except (Unknown, AttributeError, TypeError, ValueError):
        return None
    if nullable or not firsts:
        return None
    return re.compile("|".join(firsts))


_PATTERNS = [(rule, pattern, _first_char_pattern(pattern.pattern))
             for rule in _RULES for pattern in rule.patterns]
_CANDIDATES = {}  # character -> the (rule, pattern) that can start there


def _candidates(char):
    found = _CANDIDATES.get(char)
    if found is None:
        found = [(rule, pattern) for rule, pattern, first in _PATTERNS
                 if first is None or first.match(char)]
        _CANDIDATES[char] = found
    return found


def _scan(text):
    """The tokens (and `_LINE` marks) of `text`, a string of UTF-16 units."""
    out = []
    pos = 0
    end = len(text)
    while pos < end:
        fast = _FAST_WORD.match(text, pos)
        if fast is not None and fast.group().lower() not in _FAST_EXCEPTIONS:
            out.append(fast.group())
            pos = fast.end()
            continue
        fast = _FAST_SPACES.match(text, pos)
        if fast is not None:
            pos = fast.end()
            continue
        best_length = 0
        best_rule = best_match = None
        for rule, pattern in _candidates(text[pos]):
            match = pattern.match(text, pos)
            if match is not None and match.end() - pos > best_length:
                best_length = match.end() - pos
                best_rule, best_match = rule, match
        token = best_match.group("tok")
        pos += len(token) if best_rule.keep is None else best_rule.keep(token)
        output = best_rule.action(token)
        if output is not _SKIP:
            out.append(output)
    return out


def _to_utf16_units(text):
    """`text` with each character above U+FFFF as its two surrogates."""
    if all(ord(c) <= 0xFFFF for c in text):
        return text
    units = []
    for c in text:
        code = ord(c)
        if code > 0xFFFF:
            code -= 0x10000
            units.append(chr(0xD800 + (code >> 10)))
            units.append(chr(0xDC00 + (code & 0x3FF)))
        else:
            units.append(c)
    return "".join(units)


def _from_utf16_units(token):
    if all(ord(c) < 0xD800 or ord(c) > 0xDFFF for c in token):
        return token
    return token.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _check_caption(caption, where):
    if not isinstance(caption, str):
        raise ValueError(f"{where}: a caption must be a string, got "
                         f"{type(caption).__name__} {caption!r:.60}.")
    return caption.translate(_LINE_SEPARATOR_TABLE)


def stanford_ptb_lines(captions, lowercase=True):
    """The lines of Stanford's PTBTokenizer (CoreNLP 3.4.1, `-preserveLines
    -lowerCase`) for captions written one per line, before pycocoevalcap
    drops punctuation.

    Line separators inside a caption are read as spaces (see the module
    docstring), so there is always one line per caption.

    Args:
        captions: list of caption strings, in the order they would be
            written to the file (the order matters only through the
            trailing-context rules, which look into the next line).
        lowercase: lower-case the tokens (`-lowerCase`).

    Returns:
        A list of strings, one per caption: its tokens joined by spaces.
    """
    captions = [_check_caption(c, f"caption {i}") for i, c in enumerate(captions)]
    if not captions:
        return []
    lines = [[]]
    for token in _scan(_to_utf16_units("\n".join(captions))):
        if token is _LINE:
            lines.append([])
        else:
            lines[-1].append(_from_utf16_units(token))
    if len(lines) != len(captions):  # only a bug in the rules could do this
        raise RuntimeError(f"PTB lexer: {len(lines)} lines for {len(captions)} captions.")
    # Java's String.toLowerCase(Locale.ENGLISH) on each token.
    return [" ".join(t.lower() if lowercase else t for t in line) for line in lines]


def _drop_punctuation(line):
    # pycocoevalcap's own post-processing of a tokenizer line, step by step.
    return " ".join(w for w in line.rstrip().split(" ") if w not in PUNCTUATION)


def ptb_tokenize(caption):
    """Tokenises one caption as the COCO caption evaluation does.

    Stanford PTB tokenisation, lower-cased, with pycocoevalcap's punctuation
    tokens removed: `"A man's hat (red)."` -> `["a", "man", "'s", "hat",
    "-lrb-", "red", "-rrb-"]`. The caption is read as a line of its own at
    the end of the input (see `tokenize_captions` for a batch, which is
    what pycocoevalcap tokenises).

    Args:
        caption: the caption string.

    Returns:
        The list of tokens (empty for an empty or punctuation-only caption).
    """
    line = _drop_punctuation(stanford_ptb_lines([caption])[0])
    return line.split(" ") if line else []


def tokenize_captions(captions_for_image):
    """pycocoevalcap's `PTBTokenizer().tokenize`, without Java.

    All captions are tokenised as one input, one caption per line, in the
    order of the dict and of each list, exactly as pycocoevalcap writes
    them, so the result equals pycocoevalcap's string for string. Unlike
    pycocoevalcap, a caption holding a line separator (`\\r`, U+2028, ...)
    cannot shift the captions after it onto other images: each caption is
    one line by construction.

    Args:
        captions_for_image: dict `{image_id: [caption, ...]}` where a caption
            is a string or a COCO annotation dict with a `"caption"` string.

    Returns:
        dict `{image_id: [tokenised caption string, ...]}` (tokens joined by
        spaces; `""` for a caption with no tokens left).
    """
    keys = []
    captions = []
    for image_id, items in captions_for_image.items():
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"image {image_id!r}: expected a list of captions, got "
                             f"{type(items).__name__}.")
        for i, item in enumerate(items):
            caption = item.get("caption") if isinstance(item, dict) else item
            _check_caption(caption, f"image {image_id!r}, caption {i}")
            keys.append(image_id)
            captions.append(caption)
    result = {image_id: [] for image_id in captions_for_image}
    for image_id, line in zip(keys, stanford_ptb_lines(captions)):
        result[image_id].append(_drop_punctuation(line))
    return result
