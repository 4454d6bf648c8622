"""The character classes of Stanford's PTBLexer (CoreNLP 3.4.1), as data.

The JFlex scanner was generated with the Unicode tables of its day (about
Unicode 6): `[:letter:]` (Java's Character.isLetter), `[:digit:]`
(isDigit) and `[:uppercase:]` (isUpperCase) of that version, on UTF-16 code
units. Python's `str.isalpha` follows a newer Unicode, with some 500 more
letters in the Basic Multilingual Plane (and Cherokee capitals, among
others), so the classes are kept here as they are.

They were read off the tokenizer itself: each BMP character was tokenised
in contexts where only a letter, a digit or a capital changes the result
(`#` + c, c + `/2`, `Inc. ` + c). Each string is space-separated
hexadecimal code points and ranges; `char_class` makes a regex class body.
"""

# [:letter:]
LETTERS = (
    "41-5a 61-7a aa b5 ba c0-d6 d8-f6 f8-2c1 2c6-2d1 2e0-2e4 2ec 2ee 370-374 376-377 37a-37d 386 "
    "388-38a 38c 38e-3a1 3a3-3f5 3f7-481 48a-527 531-556 559 561-587 5d0-5ea 5f0-5f2 620-64a "
    "66e-66f 671-6d3 6d5 6e5-6e6 6ee-6ef 6fa-6fc 6ff 710 712-72f 74d-7a5 7b1 7ca-7ea 7f4-7f5 7fa "
    "800-815 81a 824 828 840-858 8a0 8a2-8ac 904-939 93d 950 958-961 971-977 979-97f 985-98c "
    "98f-990 993-9a8 9aa-9b0 9b2 9b6-9b9 9bd 9ce 9dc-9dd 9df-9e1 9f0-9f1 a05-a0a a0f-a10 a13-a28 "
    "a2a-a30 a32-a33 a35-a36 a38-a39 a59-a5c a5e a72-a74 a85-a8d a8f-a91 a93-aa8 aaa-ab0 ab2-ab3 "
    "ab5-ab9 abd ad0 ae0-ae1 b05-b0c b0f-b10 b13-b28 b2a-b30 b32-b33 b35-b39 b3d b5c-b5d b5f-b61 "
    "b71 b83 b85-b8a b8e-b90 b92-b95 b99-b9a b9c b9e-b9f ba3-ba4 ba8-baa bae-bb9 bd0 c05-c0c "
    "c0e-c10 c12-c28 c2a-c33 c35-c39 c3d c58-c59 c60-c61 c85-c8c c8e-c90 c92-ca8 caa-cb3 cb5-cb9 "
    "cbd cde ce0-ce1 cf1-cf2 d05-d0c d0e-d10 d12-d3a d3d d4e d60-d61 d7a-d7f d85-d96 d9a-db1 "
    "db3-dbb dbd dc0-dc6 e01-e30 e32-e33 e40-e46 e81-e82 e84 e87-e88 e8a e8d e94-e97 e99-e9f "
    "ea1-ea3 ea5 ea7 eaa-eab ead-eb0 eb2-eb3 ebd ec0-ec4 ec6 edc-edf f00 f40-f47 f49-f6c f88-f8c "
    "1000-102a 103f 1050-1055 105a-105d 1061 1065-1066 106e-1070 1075-1081 108e 10a0-10c5 10c7 "
    "10cd 10d0-10fa 10fc-1248 124a-124d 1250-1256 1258 125a-125d 1260-1288 128a-128d 1290-12b0 "
    "12b2-12b5 12b8-12be 12c0 12c2-12c5 12c8-12d6 12d8-1310 1312-1315 1318-135a 1380-138f "
    "13a0-13f4 1401-166c 166f-167f 1681-169a 16a0-16ea 1700-170c 170e-1711 1720-1731 1740-1751 "
    "1760-176c 176e-1770 1780-17b3 17d7 17dc 1820-1877 1880-18a8 18aa 18b0-18f5 1900-191c "
    "1950-196d 1970-1974 1980-19ab 19c1-19c7 1a00-1a16 1a20-1a54 1aa7 1b05-1b33 1b45-1b4b "
    "1b83-1ba0 1bae-1baf 1bba-1be5 1c00-1c23 1c4d-1c4f 1c5a-1c7d 1ce9-1cec 1cee-1cf1 1cf5-1cf6 "
    "1d00-1dbf 1e00-1f15 1f18-1f1d 1f20-1f45 1f48-1f4d 1f50-1f57 1f59 1f5b 1f5d 1f5f-1f7d "
    "1f80-1fb4 1fb6-1fbc 1fbe 1fc2-1fc4 1fc6-1fcc 1fd0-1fd3 1fd6-1fdb 1fe0-1fec 1ff2-1ff4 "
    "1ff6-1ffc 2071 207f 2090-209c 2102 2107 210a-2113 2115 2119-211d 2124 2126 2128 212a-212d "
    "212f-2139 213c-213f 2145-2149 214e 2183-2184 2c00-2c2e 2c30-2c5e 2c60-2ce4 2ceb-2cee "
    "2cf2-2cf3 2d00-2d25 2d27 2d2d 2d30-2d67 2d6f 2d80-2d96 2da0-2da6 2da8-2dae 2db0-2db6 "
    "2db8-2dbe 2dc0-2dc6 2dc8-2dce 2dd0-2dd6 2dd8-2dde 2e2f 3005-3006 3031-3035 303b-303c "
    "3041-3096 309d-309f 30a1-30fa 30fc-30ff 3105-312d 3131-318e 31a0-31ba 31f0-31ff 3400-4db5 "
    "4e00-9fcc a000-a48c a4d0-a4fd a500-a60c a610-a61f a62a-a62b a640-a66e a67f-a697 a6a0-a6e5 "
    "a717-a71f a722-a788 a78b-a78e a790-a793 a7a0-a7aa a7f8-a801 a803-a805 a807-a80a a80c-a822 "
    "a840-a873 a882-a8b3 a8f2-a8f7 a8fb a90a-a925 a930-a946 a960-a97c a984-a9b2 a9cf aa00-aa28 "
    "aa40-aa42 aa44-aa4b aa60-aa76 aa7a aa80-aaaf aab1 aab5-aab6 aab9-aabd aac0 aac2 aadb-aadd "
    "aae0-aaea aaf2-aaf4 ab01-ab06 ab09-ab0e ab11-ab16 ab20-ab26 ab28-ab2e abc0-abe2 ac00-d7a3 "
    "d7b0-d7c6 d7cb-d7fb f900-fa6d fa70-fad9 fb00-fb06 fb13-fb17 fb1d fb1f-fb28 fb2a-fb36 "
    "fb38-fb3c fb3e fb40-fb41 fb43-fb44 fb46-fbb1 fbd3-fd3d fd50-fd8f fd92-fdc7 fdf0-fdfb "
    "fe70-fe74 fe76-fefc ff21-ff3a ff41-ff5a ff66-ffbe ffc2-ffc7 ffca-ffcf ffd2-ffd7 ffda-ffdc "
)

# [:digit:]
DIGITS = (
    "30-39 660-669 6f0-6f9 7c0-7c9 966-96f 9e6-9ef a66-a6f ae6-aef b66-b6f be6-bef c66-c6f "
    "ce6-cef d66-d6f e50-e59 ed0-ed9 f20-f29 1040-1049 1090-1099 17e0-17e9 1810-1819 1946-194f "
    "19d0-19d9 1a80-1a89 1a90-1a99 1b50-1b59 1bb0-1bb9 1c40-1c49 1c50-1c59 a620-a629 a8d0-a8d9 "
    "a900-a909 a9d0-a9d9 aa50-aa59 abf0-abf9 ff10-ff19 "
)

# [:uppercase:]
UPPERCASE = (
    "41-5a c0-d6 d8-de 100 102 104 106 108 10a 10c 10e 110 112 114 116 118 11a 11c 11e 120 122 "
    "124 126 128 12a 12c 12e 130 132 134 136 139 13b 13d 13f 141 143 145 147 14a 14c 14e 150 152 "
    "154 156 158 15a 15c 15e 160 162 164 166 168 16a 16c 16e 170 172 174 176 178-179 17b 17d "
    "181-182 184 186-187 189-18b 18e-191 193-194 196-198 19c-19d 19f-1a0 1a2 1a4 1a6-1a7 1a9 1ac "
    "1ae-1af 1b1-1b3 1b5 1b7-1b8 1bc 1c4 1c7 1ca 1cd 1cf 1d1 1d3 1d5 1d7 1d9 1db 1de 1e0 1e2 1e4 "
    "1e6 1e8 1ea 1ec 1ee 1f1 1f4 1f6-1f8 1fa 1fc 1fe 200 202 204 206 208 20a 20c 20e 210 212 214 "
    "216 218 21a 21c 21e 220 222 224 226 228 22a 22c 22e 230 232 23a-23b 23d-23e 241 243-246 248 "
    "24a 24c 24e 370 372 376 386 388-38a 38c 38e-38f 391-3a1 3a3-3ab 3cf 3d2-3d4 3d8 3da 3dc 3de "
    "3e0 3e2 3e4 3e6 3e8 3ea 3ec 3ee 3f4 3f7 3f9-3fa 3fd-42f 460 462 464 466 468 46a 46c 46e 470 "
    "472 474 476 478 47a 47c 47e 480 48a 48c 48e 490 492 494 496 498 49a 49c 49e 4a0 4a2 4a4 4a6 "
    "4a8 4aa 4ac 4ae 4b0 4b2 4b4 4b6 4b8 4ba 4bc 4be 4c0-4c1 4c3 4c5 4c7 4c9 4cb 4cd 4d0 4d2 4d4 "
    "4d6 4d8 4da 4dc 4de 4e0 4e2 4e4 4e6 4e8 4ea 4ec 4ee 4f0 4f2 4f4 4f6 4f8 4fa 4fc 4fe 500 502 "
    "504 506 508 50a 50c 50e 510 512 514 516 518 51a 51c 51e 520 522 524 526 531-556 10a0-10c5 "
    "10c7 10cd 1e00 1e02 1e04 1e06 1e08 1e0a 1e0c 1e0e 1e10 1e12 1e14 1e16 1e18 1e1a 1e1c 1e1e "
    "1e20 1e22 1e24 1e26 1e28 1e2a 1e2c 1e2e 1e30 1e32 1e34 1e36 1e38 1e3a 1e3c 1e3e 1e40 1e42 "
    "1e44 1e46 1e48 1e4a 1e4c 1e4e 1e50 1e52 1e54 1e56 1e58 1e5a 1e5c 1e5e 1e60 1e62 1e64 1e66 "
    "1e68 1e6a 1e6c 1e6e 1e70 1e72 1e74 1e76 1e78 1e7a 1e7c 1e7e 1e80 1e82 1e84 1e86 1e88 1e8a "
    "1e8c 1e8e 1e90 1e92 1e94 1e9e 1ea0 1ea2 1ea4 1ea6 1ea8 1eaa 1eac 1eae 1eb0 1eb2 1eb4 1eb6 "
    "1eb8 1eba 1ebc 1ebe 1ec0 1ec2 1ec4 1ec6 1ec8 1eca 1ecc 1ece 1ed0 1ed2 1ed4 1ed6 1ed8 1eda "
    "1edc 1ede 1ee0 1ee2 1ee4 1ee6 1ee8 1eea 1eec 1eee 1ef0 1ef2 1ef4 1ef6 1ef8 1efa 1efc 1efe "
    "1f08-1f0f 1f18-1f1d 1f28-1f2f 1f38-1f3f 1f48-1f4d 1f59 1f5b 1f5d 1f5f 1f68-1f6f 1fb8-1fbb "
    "1fc8-1fcb 1fd8-1fdb 1fe8-1fec 1ff8-1ffb 2102 2107 210b-210d 2110-2112 2115 2119-211d 2124 "
    "2126 2128 212a-212d 2130-2133 213e-213f 2145 2160-216f 2183 24b6-24cf 2c00-2c2e 2c60 "
    "2c62-2c64 2c67 2c69 2c6b 2c6d-2c70 2c72 2c75 2c7e-2c80 2c82 2c84 2c86 2c88 2c8a 2c8c 2c8e "
    "2c90 2c92 2c94 2c96 2c98 2c9a 2c9c 2c9e 2ca0 2ca2 2ca4 2ca6 2ca8 2caa 2cac 2cae 2cb0 2cb2 "
    "2cb4 2cb6 2cb8 2cba 2cbc 2cbe 2cc0 2cc2 2cc4 2cc6 2cc8 2cca 2ccc 2cce 2cd0 2cd2 2cd4 2cd6 "
    "2cd8 2cda 2cdc 2cde 2ce0 2ce2 2ceb 2ced 2cf2 a640 a642 a644 a646 a648 a64a a64c a64e a650 "
    "a652 a654 a656 a658 a65a a65c a65e a660 a662 a664 a666 a668 a66a a66c a680 a682 a684 a686 "
    "a688 a68a a68c a68e a690 a692 a694 a696 a722 a724 a726 a728 a72a a72c a72e a732 a734 a736 "
    "a738 a73a a73c a73e a740 a742 a744 a746 a748 a74a a74c a74e a750 a752 a754 a756 a758 a75a "
    "a75c a75e a760 a762 a764 a766 a768 a76a a76c a76e a779 a77b a77d-a77e a780 a782 a784 a786 "
    "a78b a78d a790 a792 a7a0 a7a2 a7a4 a7a6 a7a8 a7aa ff21-ff3a "
)


def char_class(ranges):
    """A regex character-class body (no brackets) for one of the strings."""
    parts = []
    for item in ranges.split():
        first, _, last = item.partition("-")
        parts.append(f"\\u{int(first, 16):04x}")
        if last:
            parts.append(f"-\\u{int(last, 16):04x}")
    return "".join(parts)
