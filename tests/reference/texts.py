"""The texts behind the reference fixtures: tokenizer strings and prompts.

Everything here was written for this project. Each string is chosen to poke
one part of a tokenizer (pre-tokenizer regex classes, digit grouping, byte
fallback, special-token splitting, whitespace merging); the name says which.
make_reference.py turns these lists into strings.json and prompts.json, so
edit here, not in the JSON.
"""

# A ~3,000-character text: long enough to exercise many merges in one call.
LONG_TEXT = (
    "The keeper of the North Ridge light wrote in his log every evening at "
    "half past six, whatever the weather. His entries from the winter of 1931 "
    "survive in a box at the county archive: 214 pages, bound in oilcloth, "
    "with a pressed sprig of heather between pages 88 and 89. Most days say "
    "little. \"Wind SW, force 5. Glass falling. Lamp lit 16:42.\" Some days say "
    "more. On 3 February he noted that the supply boat was eleven days late, "
    "that the paraffin would last \"perhaps a fortnight if I am careful, which "
    "I am\", and that a seal had taken to sleeping on the landing stage.\n\n"
    "Why does any of this matter? Because the light was never just a lamp. "
    "It was a clockwork mechanism (wound by hand every 4 hours), a lens "
    "assembly weighing 2.7 tonnes, a fog signal, a weather station, and a "
    "man who could not leave. When the weights jammed on the night of 19 "
    "March, he turned the lens by hand until dawn: roughly 9 hours, at one "
    "revolution every 30 seconds, which is about 1,080 turns. He mentions it "
    "in a single line and then complains about the price of tea.\n\n"
    "Historians like to say that the age of the lighthouse keeper ended with "
    "automation, and that is true in the narrow sense. Sensors replaced eyes; "
    "timers replaced the evening round; a radio link replaced the log. But "
    "the log did something the radio link doesn't: it recorded what the "
    "keeper thought was worth recording. A gauge can tell you the pressure "
    "was 983 hPa at 18:30. It can't tell you that the gulls went quiet an "
    "hour before the squall, or that the ship on the horizon \u2014 a collier, "
    "by the smoke \u2014 seemed to be standing off longer than usual.\n\n"
    "There's a lesson here for anyone who builds systems that watch other "
    "systems. Logs are not only for machines. The best ones are written for "
    "a tired person reading them at 3 a.m. who needs to know, quickly: what "
    "happened, in what order, and what did the system believe at the time? "
    "The keeper's entries answer all three. They're terse, dated, and "
    "honest about uncertainty (\"visibility poor, maybe 2 miles, maybe less\"). "
    "They distinguish what he saw from what he guessed.\n\n"
    "In the spring the boat came back on schedule. He counted the stores \u2014 "
    "36 tins of paraffin, 12 sacks of coal, 1 crate of oranges (\"a kindness "
    "from Mrs. Dale\") \u2014 and went back to his routine. The seal stayed until "
    "May. The final entry of the volume, dated 30 June 1931, reads in full: "
    "\"Calm. Clear. All well. Lamp lit 21:58.\" It is hard to think of a better "
    "status report.\n\n"
    "The light itself was automated in 1968. The lens went to a museum in "
    "the town, where it still turns, slowly, on an electric motor, and a "
    "small card beside it explains that it once showed 'two white flashes "
    "every 15 s, visible 18 nautical miles'. Nobody reads the card.\n\n"
    "If you visit the archive today you can ask to see the box. Bring a "
    "pencil; pens aren't allowed. The reading room opens at 09:30 and closes "
    "at 16:00 on weekdays, and the staff will tell you, kindly but firmly, "
    "that the heather is not to be touched. It's been there for 90-odd years "
    "and they'd like it to last another ninety."
)

# Prose.
PROSE = [
    ("prose_simple", "Hello world"),
    ("prose_sentence", "The quick brown fox jumps over the lazy dog."),
    ("prose_question", "Where did you put the keys to the shed?"),
    ("prose_paragraph",
     "Rivers rarely run straight. Over centuries they wander across their "
     "flood plains, cutting into the outside of each bend and depositing "
     "silt on the inside, until a loop pinches off and becomes a lake."),
    ("prose_dialogue",
     "\"Are you coming?\" she asked.\n\"In a minute,\" he said, not looking up."),
    ("prose_caps", "THIS IS AN ANNOUNCEMENT. ALL PASSENGERS MUST DISEMBARK NOW."),
    ("prose_mixed_case", "McDonald's iPhone eBay JavaScript TypeScript LaTeX NASA's"),
    ("prose_camel", "getUserNameFromDatabase parseHTTPResponse XMLHttpRequest"),
    ("prose_snake", "max_batch_tokens kv_cache_block_size __init__ _private"),
    ("prose_hyphen", "state-of-the-art, well-known, twenty-one, re-enter"),
    ("prose_abbrev", "Dr. Smith met Mr. and Mrs. Jones at 5 p.m. on Jan. 3rd, e.g. in the U.S.A."),
    ("prose_em_dash", "It was late\u2014too late\u2014and the train had gone."),
    ("prose_ellipsis", "Well\u2026 I suppose so... maybe.... or not."),
    ("prose_quotes_curly", "\u201cIt\u2019s fine,\u201d she said. \u2018Really?\u2019"),
    ("prose_list_inline", "apples, oranges, pears; bread & butter / jam (optional)"),
    ("prose_word_long", "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism"),
    ("prose_repeated_word", "buffalo buffalo Buffalo buffalo buffalo buffalo Buffalo buffalo"),
    ("prose_no_spaces", "thisisalongrunofletterswithnospacesatallinit"),
    ("prose_legalese",
     "Notwithstanding the foregoing, the Licensee shall not (i) sublicense, "
     "(ii) assign, or (iii) otherwise transfer its rights hereunder."),
    ("prose_recipe",
     "Preheat the oven to 180\u00b0C (350\u00b0F). Whisk 2 eggs with 150 g sugar, "
     "then fold in 200 g flour."),
    ("prose_german", "Die Stra\u00dfe war na\u00df, und die B\u00e4ume r\u00fchrten sich nicht. \u00c4rger \u00fcber \u00d6l."),
    ("prose_french", "L'\u00e9t\u00e9 dernier, nous sommes all\u00e9s \u00e0 la f\u00eate du village; c'\u00e9tait g\u00e9nial !"),
    ("prose_spanish", "\u00bfD\u00f3nde est\u00e1 la biblioteca? \u00a1No lo s\u00e9! El ni\u00f1o come ma\u00f1ana."),
    ("prose_polish", "Za\u017c\u00f3\u0142\u0107 g\u0119\u015bl\u0105 ja\u017a\u0144. \u0141\u00f3d\u017a i Gda\u0144sk."),
    ("prose_turkish", "\u0130stanbul'da \u0131\u015f\u0131k, \u00e7i\u00e7ek ve \u011fa\u011f: I\u0131 \u0130i."),
    ("prose_vietnamese", "Ti\u1ebfng Vi\u1ec7t c\u00f3 nhi\u1ec1u d\u1ea5u: \u0111\u01b0\u1eddng, ng\u01b0\u1eddi, h\u1ecdc."),
    ("prose_russian", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u041a\u0430\u043a \u0434\u0435\u043b\u0430? \u0421\u0435\u0433\u043e\u0434\u043d\u044f \u0445\u043e\u0440\u043e\u0448\u0430\u044f \u043f\u043e\u0433\u043e\u0434\u0430."),
    ("prose_greek", "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03c3\u03b1\u03c2! \u0397 \u0391\u03b8\u03ae\u03bd\u03b1 \u03b5\u03af\u03bd\u03b1\u03b9 \u03c0\u03c1\u03c9\u03c4\u03b5\u03cd\u03bf\u03c5\u03c3\u03b1."),
    ("prose_ukrainian", "\u0407\u0436\u0430\u0447\u043e\u043a \u0456 \u0491\u0430\u043d\u043e\u043a \u0454 \u0432 \u0441\u0430\u0434\u0443."),
    ("prose_hebrew", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd, \u05de\u05d4 \u05e9\u05dc\u05d5\u05de\u05da?"),
    ("prose_thai", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e27\u0e31\u0e19\u0e19\u0e35\u0e49\u0e2d\u0e32\u0e01\u0e32\u0e28\u0e14\u0e35\u0e21\u0e32\u0e01"),
    ("prose_armenian_georgian", "\u0532\u0561\u0580\u0587 \u0541\u0565\u0566 \u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0"),
]

CONTRACTIONS = [
    ("contr_s", "It's the dog's bone, and that's that."),
    ("contr_t", "I don't know, and I can't say, and I won't guess."),
    ("contr_re", "We're here, they're there, you're everywhere."),
    ("contr_ve", "I've seen it; we've heard it; they've done it."),
    ("contr_m", "I'm sure I'm right."),
    ("contr_ll", "She'll go, we'll stay, it'll rain."),
    ("contr_d", "He'd have known; I'd said so; you'd agree."),
    ("contr_upper_S", "IT'S THE DOG'S BONE. JOHN'S CAR. WE'RE LATE. I'VE GOT IT. I'LL GO. HE'D KNOW. I'M OK. DON'T."),
    ("contr_mixed_case", "It'S, DoN't, We'Re, I'Ve, I'Ll, He'D, I'M"),
    ("contr_bare", "'s 't 're 've 'm 'll 'd"),
    ("contr_no_letter_before", " 's ' s '' 'x 'S"),
    ("contr_curly", "It\u2019s can\u2019t we\u2019re I\u2019ve"),
    ("contr_possessive_plural", "The students' books and James' hat, the '90s."),
    ("contr_rock", "rock 'n' roll, fish 'n' chips, 'twas, o'clock, y'all'd've"),
    ("contr_quotes", "'single quoted' and \"double quoted\" and `backticks`"),
]

CODE = [
    ("code_py_func",
     "def add(a, b):\n    \"\"\"Return the sum.\"\"\"\n    return a + b\n"),
    ("code_py_class",
     "class Stack:\n    def __init__(self):\n        self._items = []\n\n"
     "    def push(self, item):\n        self._items.append(item)\n\n"
     "    def pop(self):\n        if not self._items:\n"
     "            raise IndexError(\"pop from empty stack\")\n"
     "        return self._items.pop()\n"),
    ("code_py_comprehension",
     "squares = {n: n ** 2 for n in range(10) if n % 2 == 0}\nprint(f\"{squares!r:>20}\")"),
    ("code_py_deep_indent",
     "if a:\n    if b:\n        if c:\n            if d:\n                if e:\n"
     "                    pass\n"),
    ("code_py_tabs", "def f():\n\tif x:\n\t\treturn 1\n\treturn 0\n"),
    ("code_py_decorator",
     "@functools.lru_cache(maxsize=None)\ndef fib(n: int) -> int:\n"
     "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"),
    ("code_py_async",
     "async def main():\n    async with aiohttp.ClientSession() as s:\n"
     "        r = await s.get(url)\n        return await r.json()\n"),
    ("code_py_regex", "pattern = re.compile(r\"^(?P<key>[\\w.-]+)\\s*=\\s*(?P<val>.*)$\")"),
    ("code_c_main",
     "#include <stdio.h>\n\nint main(int argc, char **argv)\n{\n"
     "\tfor (int i = 0; i < argc; i++)\n\t\tprintf(\"%d: %s\\n\", i, argv[i]);\n"
     "\treturn 0;\n}\n"),
    ("code_c_struct",
     "typedef struct {\n    uint32_t n_tokens;\n    float   *logits;   /* [n_vocab] */\n"
     "} batch_t;\n"),
    ("code_c_macro",
     "#define MAX(a, b) ((a) > (b) ? (a) : (b))\n#ifndef NDEBUG\n#  define LOG(...) fprintf(stderr, __VA_ARGS__)\n#endif"),
    ("code_c_pointers", "*p++ = *q--; x->y.z[3] &= ~0x0Fu; a <<= 2; b >>= 1; c != d && e || !f;"),
    ("code_cpp_template",
     "template <typename T>\nstd::vector<T> take(const std::vector<T>& v, size_t n) {\n"
     "    return {v.begin(), v.begin() + std::min(n, v.size())};\n}"),
    ("code_js_arrow",
     "const total = items\n  .filter((x) => x.active)\n  .map(({ price, qty }) => price * qty)\n"
     "  .reduce((a, b) => a + b, 0);"),
    ("code_js_promise",
     "fetch('/api/v1/users?id=42')\n  .then(res => res.json())\n  .catch(err => console.error(`failed: ${err}`));"),
    ("code_ts_interface",
     "interface User {\n  id: number;\n  name?: string;\n  tags: ReadonlyArray<string>;\n}"),
    ("code_rust",
     "fn main() {\n    let v: Vec<i32> = (1..=10).collect();\n"
     "    println!(\"{:?}\", v.iter().sum::<i32>());\n}\n"),
    ("code_rust_match",
     "match x {\n    Some(ref y) if *y > 0 => Ok(y.clone()),\n    _ => Err(\"none\".into()),\n}"),
    ("code_go",
     "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tch := make(chan int, 3)\n"
     "\tgo func() { ch <- 1 }()\n\tfmt.Println(<-ch)\n}\n"),
    ("code_java",
     "public final class Point {\n    private final int x, y;\n"
     "    @Override public String toString() { return \"(\" + x + \", \" + y + \")\"; }\n}"),
    ("code_shell",
     "#!/bin/sh\nset -eu\nfor f in *.log; do\n  gzip -9 \"$f\" && echo \"done: ${f%.log}\"\ndone\n"),
    ("code_shell_pipe", "cat access.log | awk '{print $1}' | sort | uniq -c | sort -rn | head -n 10 2>/dev/null"),
    ("code_sql",
     "SELECT u.name, COUNT(o.id) AS n\nFROM users u\nLEFT JOIN orders o ON o.user_id = u.id\n"
     "WHERE u.created_at >= '2024-01-01'\nGROUP BY u.name\nHAVING n > 5;"),
    ("code_html",
     "<!DOCTYPE html>\n<html lang=\"en\">\n  <head><meta charset=\"utf-8\"><title>Hi</title></head>\n"
     "  <body><p class=\"note\">&lt;b&gt; &amp; &nbsp;</p></body>\n</html>"),
    ("code_css", ".btn:hover > span::after {\n  content: \"\\2192\";\n  margin: 0 4px !important;\n}"),
    ("code_haskell", "main :: IO ()\nmain = mapM_ print $ takeWhile (< 100) $ map (^2) [1..]"),
    ("code_lisp", "(defun fact (n)\n  (if (<= n 1)\n      1\n      (* n (fact (- n 1)))))"),
    ("code_makefile", "all: build/app\n\nbuild/app: main.o util.o\n\t$(CC) $(LDFLAGS) -o $@ $^\n\n%.o: %.c\n\t$(CC) -c $<\n"),
    ("code_yaml", "server:\n  port: 8443\n  tls:\n    cert: /etc/llmd/tls/cert.pem\n  tenants:\n    - name: alpha\n      weight: 2\n"),
    ("code_diff", "--- a/main.c\n+++ b/main.c\n@@ -1,3 +1,4 @@\n #include <stdio.h>\n+#include <stdlib.h>\n int main(void)\n"),
    ("code_asm", "mov rax, [rbp-8]\nadd rax, 0x10\ncmp rax, rbx\njne .L3"),
    ("code_mixed_indent", "    four\n\tone tab\n  \t mixed\n        eight\n"),
    ("code_trailing_ws", "x = 1   \ny = 2\t\nz = 3 \t \n"),
    ("code_operators", "a===b !== c >>>= d ?? e ?. f ** g // h :: i -> j => k <=> l"),
]

CJK = [
    ("zh_simple", "\u4f60\u597d\uff0c\u4e16\u754c\uff01"),
    ("zh_sentence", "\u4eca\u5929\u7684\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002"),
    ("zh_paragraph",
     "\u673a\u5668\u5b66\u4e60\u662f\u4eba\u5de5\u667a\u80fd\u7684\u4e00\u4e2a\u5206\u652f\uff0c\u5b83\u4f7f\u8ba1\u7b97\u673a\u80fd\u591f\u4ece\u6570\u636e\u4e2d\u5b66\u4e60\u89c4\u5f8b\uff0c"
     "\u800c\u4e0d\u9700\u8981\u660e\u786e\u7684\u7f16\u7a0b\u3002\u6df1\u5ea6\u5b66\u4e60\u5219\u4f7f\u7528\u591a\u5c42\u795e\u7ecf\u7f51\u7edc\u3002"),
    ("zh_traditional", "\u81fa\u7063\u7684\u50b3\u7d71\u6587\u5316\u975e\u5e38\u8c50\u5bcc\uff0c\u8aaa\u8a71\u8981\u6ce8\u610f\u79ae\u8c8c\u3002"),
    ("zh_numbers", "\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341 \u7b2c12\u7ae0 2024\u5e743\u670815\u65e5"),
    ("zh_punct", "\u300a\u7ea2\u697c\u68a6\u300b\u3001\u300c\u5f15\u7528\u300d\u3010\u6ce8\u3011\uff08\u62ec\u53f7\uff09\u2026\u2026\uff1f\uff01"),
    ("zh_mixed_en", "\u6211\u7528Python\u5199\u4e86\u4e00\u4e2aHTTP server\uff0c\u8dd1\u5728Linux\u4e0a\u3002"),
    ("zh_idiom", "\u5b88\u682a\u5f85\u5154\u3001\u753b\u86c7\u6dfb\u8db3\u3001\u4e00\u5f13\u4e8c\u9e1f"),
    ("zh_rare", "\u9f98\u9f96\u9750\u7228\u9f49 \U00020000\U0002a6d6"),
    ("zh_fullwidth", "\uff21\uff22\uff23\uff11\uff12\uff13\u3000\uff01\uff1f\uff08\uff09"),
    ("ja_hiragana", "\u3053\u3093\u306b\u3061\u306f\u3001\u304a\u5143\u6c17\u3067\u3059\u304b\uff1f"),
    ("ja_katakana", "\u30b3\u30f3\u30d4\u30e5\u30fc\u30bf\u30fc\u3068\u30bd\u30d5\u30c8\u30a6\u30a7\u30a2\u30a8\u30f3\u30b8\u30cb\u30a2"),
    ("ja_mixed", "\u6771\u4eac\u90fd\u6e0b\u8c37\u533a\u3067\u30e9\u30fc\u30e1\u30f3\u3092\u98df\u3079\u307e\u3057\u305f\u3002\u3068\u3066\u3082\u7f8e\u5473\u3057\u304b\u3063\u305f\u3067\u3059\uff01"),
    ("ja_halfwidth", "\uff7a\uff9d\uff8b\uff9f\uff6d\uff70\uff80 \uff76\uff80\uff76\uff85"),
    ("ja_long_vowel", "\u30e9\u30fc\u30e1\u30f3\u30fc\u30fc\u30fc\uff5e\uff5e\u3000\u301c"),
    ("ja_sentence",
     "\u5409\u91ce\u5bb6\u306e\u725b\u4e3c\u306f\u5b89\u304f\u3066\u65e9\u3044\u3002\u3057\u304b\u3057\u3001\u591c\u306e11\u6642\u3092\u904e\u304e\u308b\u3068\u5e97\u304c\u6df7\u3080\u3002"),
    ("ja_kanji_numbers", "\u4ee4\u548c6\u5e74\uff08\uff12\uff10\uff12\uff14\u5e74\uff09\u5341\u4e8c\u6708\u4e8c\u5341\u4e94\u65e5"),
    ("ko_simple", "\uc548\ub155\ud558\uc138\uc694, \ubc18\uac11\uc2b5\ub2c8\ub2e4."),
    ("ko_sentence", "\uc624\ub298 \uc11c\uc6b8\uc740 \ub9d1\uace0 \ub530\ub73b\ud569\ub2c8\ub2e4. \ub0b4\uc77c\uc740 \ube44\uac00 \uc62c \uac83 \uac19\uc2b5\ub2c8\ub2e4."),
    ("ko_mixed", "\ud55c\uad6d\uc5b4\uc640 English\ub97c \uc11e\uc5b4\uc11c \uc4f0\uba74 token\uc774 \uc5b4\ub5bb\uac8c \ub420\uae4c?"),
    ("ko_jamo_decomposed", "\u1112\u1161\u11ab\u1100\u1173\u11af"),
    ("ko_numbers", "2024\ub144 5\uc6d4 8\uc77c \uc624\ud6c4 3\uc2dc 30\ubd84"),
    ("ko_compat_jamo", "\u314b\u314b\u314b \u314e\u314e \u3160\u3160"),
]

OTHER_SCRIPTS = [
    ("ar_simple", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645"),
    ("ar_sentence", "\u0627\u0644\u0644\u063a\u0629 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u062c\u0645\u064a\u0644\u0629 \u062c\u062f\u0627\u064b\u060c \u0648\u0647\u064a \u062a\u0643\u062a\u0628 \u0645\u0646 \u0627\u0644\u064a\u0645\u064a\u0646 \u0625\u0644\u0649 \u0627\u0644\u064a\u0633\u0627\u0631."),
    ("ar_diacritics", "\u0628\u0650\u0633\u0652\u0645\u0650 \u0627\u0644\u0644\u0651\u064e\u0647\u0650 \u0627\u0644\u0631\u0651\u064e\u062d\u0652\u0645\u064e\u0670\u0646\u0650"),
    ("ar_digits", "\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660 \u0648 123"),
    ("ar_mixed_ltr", "\u0627\u0633\u062a\u062e\u062f\u0645 Python 3.12 \u0644\u0644\u0628\u0631\u0645\u062c\u0629"),
    ("fa_persian", "\u0633\u0644\u0627\u0645\u060c \u062d\u0627\u0644\u062a \u0686\u0637\u0648\u0631\u0647\u061f \u06f1\u06f2\u06f3"),
    ("hi_simple", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e"),
    ("hi_sentence", "\u092d\u093e\u0930\u0924 \u090f\u0915 \u0935\u093f\u0936\u093e\u0932 \u0926\u0947\u0936 \u0939\u0948 \u091c\u093f\u0938\u092e\u0947\u0902 \u0915\u0908 \u092d\u093e\u0937\u093e\u090f\u0901 \u092c\u094b\u0932\u0940 \u091c\u093e\u0924\u0940 \u0939\u0948\u0902\u0964"),
    ("hi_conjuncts", "\u0915\u094d\u0937 \u0924\u094d\u0930 \u091c\u094d\u091e \u0936\u094d\u0930 \u0926\u094d\u0935 \u0939\u094d\u092e"),
    ("hi_digits", "\u0967\u0968\u0969\u096a\u096b \u0930\u0941\u092a\u092f\u0947 \u20b9500"),
    ("hi_mixed", "\u092e\u0948\u0902\u0928\u0947 Amazon \u0938\u0947 \u090f\u0915 laptop order \u0915\u093f\u092f\u093e\u0964"),
    ("bn_bengali", "\u0986\u09ae\u09bf \u09ac\u09be\u0982\u09b2\u09be\u09af\u09bc \u0995\u09a5\u09be \u09ac\u09b2\u09bf\u0964"),
    ("ta_tamil", "\u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd \u0b89\u0bb2\u0b95\u0bae\u0bcd"),
    ("am_ethiopic", "\u1230\u120b\u121d \u1208\u12d3\u1208\u121d"),
    ("my_burmese", "\u1019\u1004\u103a\u1039\u1002\u101c\u102c\u1015\u102b"),
]

EMOJI = [
    ("emoji_single", "\U0001f600"),
    ("emoji_run", "\U0001f600\U0001f603\U0001f604\U0001f601\U0001f606\U0001f605\U0001f923\U0001f602"),
    ("emoji_in_text", "Great job! \U0001f44d See you soon \U0001f44b"),
    ("emoji_skin_tone", "\U0001f44d\U0001f3fb \U0001f44d\U0001f3fc \U0001f44d\U0001f3fd \U0001f44d\U0001f3fe \U0001f44d\U0001f3ff"),
    ("emoji_zwj_family", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"),
    ("emoji_zwj_professions", "\U0001f469\u200d\U0001f4bb \U0001f468\u200d\U0001f373 \U0001f9d1\u200d\U0001f680 \U0001f469\U0001f3fd\u200d\U0001f52c"),
    ("emoji_zwj_rainbow_flag", "\U0001f3f3\ufe0f\u200d\U0001f308"),
    ("emoji_flags", "\U0001f1ef\U0001f1f5 \U0001f1fa\U0001f1f8 \U0001f1e9\U0001f1ea \U0001f1e7\U0001f1f7 \U0001f1f0\U0001f1f7"),
    ("emoji_flags_adjacent", "\U0001f1eb\U0001f1f7\U0001f1ee\U0001f1f9\U0001f1ea\U0001f1f8"),
    ("emoji_subdivision_flag", "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"),
    ("emoji_keycap", "1\ufe0f\u20e3 2\ufe0f\u20e3 #\ufe0f\u20e3 *\ufe0f\u20e3"),
    ("emoji_variation", "\u2764\ufe0f \u2764 \u263a\ufe0f \u263a \u2600\ufe0f"),
    ("emoji_heart_on_fire", "\u2764\ufe0f\u200d\U0001f525"),
    ("emoji_with_punct", "Wow!!!\U0001f525\U0001f525\U0001f525 (lol) \U0001f602\U0001f602"),
    ("emoji_cjk", "\u4eca\u65e5\u306f\u6674\u308c\u2600\ufe0f\u3067\u3059\U0001f338"),
    ("emoji_symbols", "\u2605\u2606\u2713\u2714\u2717\u2190\u2191\u2192\u2193\u2194\u21d2\u221e\u2248\u2260"),
]

NUMBERS = [
    ("num_1", "7"),
    ("num_2", "42"),
    ("num_3", "123"),
    ("num_4", "2024"),
    ("num_5", "31415"),
    ("num_6", "271828"),
    ("num_7", "1234567"),
    ("num_8", "98765432"),
    ("num_9", "100000000"),
    ("num_10", "9876543210"),
    ("num_12", "123456789012"),
    ("num_16", "4111111111111111"),
    ("num_20", "12345678901234567890"),
    ("num_30", "314159265358979323846264338327"),
    ("num_spaced", "1 22 333 4444 55555 666666 7777777"),
    ("num_leading_zeros", "007 0042 000001 0.0001"),
    ("num_decimal", "3.14159 -2.71828 +1.0 .5 5."),
    ("num_thousands", "1,000 1,234,567 12.345.678,90 1 000 000"),
    ("num_scientific", "6.022e23 1.6E-19 -3e+8 1e-12"),
    ("num_hex_bin_oct", "0xDEADBEEF 0b1011_0110 0o755 0x7fffffff"),
    ("num_money", "$19.99 \u20ac5,00 \u00a3100 \u00a51000 \u20b9250.50"),
    ("num_percent", "50% 99.9% -0.5% 100%+"),
    ("num_dates", "2024-03-15 15/03/2024 03.15.24 12:34:56 2024-03-15T12:34:56.789Z"),
    ("num_phone_ip", "+1 (555) 123-4567, 192.168.0.1, ::1, 10.0.0.255:8080"),
    ("num_version", "v1.2.3 Python 3.11.7 gcc-12.2.0 1.0.0-rc.1+build.5"),
    ("num_fraction_ordinal", "1/2 3/4 1st 2nd 3rd 4th 21st 100th \u00bd \u00be"),
    ("num_math_digits", "x1 x12 x123 a1b2c3 ab12cd345ef6789"),
    ("num_unicode_digits", "\uff10\uff11\uff12 \u0660\u0661\u0662 \u0966\u0967\u0968 \u00b2\u00b3 \u2460\u2461\u2462"),
    ("num_negative_sign", "\u22125 \u2013 3 \u2014 2 -1"),
    ("num_table", "  1 |   10 |  100\n 22 |  220 | 2200\n333 | 3330 | 33300\n"),
]

PUNCT = [
    ("punct_run_excl", "!!!!!!!!!!"),
    ("punct_run_q", "???!!!???"),
    ("punct_run_dots", "..........."),
    ("punct_run_dash", "-----------------------------------"),
    ("punct_run_eq", "========"),
    ("punct_run_mixed", "!@#$%^&*()_+-=[]{}|;':\",./<>?`~"),
    ("punct_run_ascii_art", "+--+--+\n|  |  |\n+--+--+"),
    ("punct_brackets", "(((nested))) [[x]] {{y}} <<z>>"),
    ("punct_slashes", "a/b\\c//d\\\\e///f"),
    ("punct_underscore", "____init____ __ _ ___"),
    ("punct_unicode", "\u00ab\u00bb \u2039\u203a \u201e\u201c \u00a7 \u00b6 \u2020 \u2021 \u2022 \u00b7 \u2030 \u2116"),
    ("punct_after_word", "word!word?word.word,word;word:word"),
    ("punct_space_before", "a ! b ? c . d , e"),
    ("punct_apostrophe_runs", "'''' \"\"\"\" ``` ''' \"\"\""),
]

WHITESPACE = [
    ("ws_one_space", " "),
    ("ws_two_spaces", "  "),
    ("ws_many_spaces", "          "),
    ("ws_leading_space", " hello"),
    ("ws_leading_spaces", "    hello"),
    ("ws_trailing_space", "hello "),
    ("ws_trailing_spaces", "hello    "),
    ("ws_both", "   hello world   "),
    ("ws_inner_runs", "a  b   c    d     e"),
    ("ws_newline", "\n"),
    ("ws_newlines_3", "\n\n\n"),
    ("ws_newlines_text", "first\n\n\nsecond\n\nthird\nfourth"),
    ("ws_tab", "\t"),
    ("ws_tabs", "\t\t\t"),
    ("ws_tab_text", "col1\tcol2\tcol3\n1\t2\t3"),
    ("ws_crlf", "line one\r\nline two\r\n"),
    ("ws_cr_only", "a\rb\r\rc"),
    ("ws_mixed", " \t \n \r\n\t\n  \n"),
    ("ws_space_newline_space", "end. \n Start"),
    ("ws_newline_then_spaces", "x\n    y\n        z"),
    ("ws_spaces_before_newline", "x    \ny"),
    ("ws_vertical_tab_ff", "a\x0bb\x0cc"),
    ("ws_unicode_spaces", "a\u00a0b\u2003c\u2009d\u3000e\u202ff"),
    ("ws_line_separators", "one\u2028two\u2029three\x85four"),
    ("ws_only_mixed", "\n \n\t\n"),
]

STRUCTURED = [
    ("url_simple", "https://example.com"),
    ("url_query", "https://www.example.org/search?q=paged+attention&lang=en&page=2#results"),
    ("url_path", "http://localhost:8080/v1/chat/completions"),
    ("url_in_text", "See https://docs.example.net/guide/install.html, then run it."),
    ("url_email", "contact: alice.smith+tag@mail.example.co.uk, bob@x.io"),
    ("url_file_path", "/usr/local/lib/python3.11/site-packages/torch/__init__.py C:\\Windows\\System32\\drivers\\etc\\hosts"),
    ("json_small", "{\"a\": 1, \"b\": [true, false, null], \"c\": {\"d\": \"e\"}}"),
    ("json_pretty",
     "{\n  \"model\": \"smollm2\",\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"Hi!\"}\n  ],\n"
     "  \"temperature\": 0.7,\n  \"stream\": true\n}"),
    ("json_escapes", "{\"path\": \"C:\\\\temp\\\\new\", \"quote\": \"\\\"hi\\\"\", \"nl\": \"a\\nb\", \"u\": \"\\u00e9\"}"),
    ("json_minified", "[{\"id\":1,\"v\":[1,2,3]},{\"id\":2,\"v\":[]},{\"id\":3,\"v\":null}]"),
    ("json_numbers", "{\"pi\": 3.141592653589793, \"big\": 9007199254740993, \"neg\": -0.0, \"exp\": 1e-7}"),
    ("md_heading", "# Title\n\n## Section 1\n\nSome *italic* and **bold** and `code`.\n"),
    ("md_list", "- item one\n- item two\n  - nested\n    - deeper\n1. first\n2. second\n"),
    ("md_table", "| name | qty |\n|------|----:|\n| a    |   1 |\n| b    |  22 |\n"),
    ("md_codeblock", "```python\nprint(\"hi\")\n```\n\n~~~\nplain\n~~~\n"),
    ("md_link_image", "[link](https://example.com \"title\") ![alt text](img/logo.png)"),
    ("md_quote_rule", "> quoted line\n> another\n\n---\n\n***\n"),
    ("xml", "<?xml version=\"1.0\"?>\n<root attr='x'><child/><![CDATA[<raw>]]></root>"),
    ("csv", "id,name,score\n1,\"Doe, John\",9.5\n2,Jane,10\n"),
    ("math_inline", "E = mc^2, a^2 + b^2 = c^2, f(x) = 3x^2 - 2x + 1"),
    ("math_unicode", "\u2200x\u2208\u211d: x\u00b2 \u2265 0, \u2211\u1d62 a\u1d62 = \u222b\u2080\u00b9 f(t) dt, \u221a2 \u2248 1.414, \u03c0 \u2260 3"),
    ("math_latex", "\\frac{\\partial L}{\\partial \\theta} = \\sum_{i=1}^{N} \\left( y_i - \\hat{y}_i \\right)^2"),
    ("math_arith", "12 + 35 = 47; 100 - 58 = 42; 6 * 7 = 42; 84 / 2 = 42; 2**10 = 1024"),
    ("math_greek", "\u03b1 + \u03b2 = \u03b3, \u0394t = 0.01, \u03bb\u2081 \u2264 \u03bb\u2082, \u03a9 = 10k\u03a9"),
    ("math_bold_letters", "\U0001d400\U0001d401\U0001d402 \U0001d49c\U0001d4b7 \U0001d538\U0001d539 \U0001d7d8\U0001d7d9"),
    ("math_matrix", "[[1, 0, 0],\n [0, 1, 0],\n [0, 0, 1]]"),
    ("mixed_scripts_1", "Hello \u4e16\u754c \u041f\u0440\u0438\u0432\u0435\u0442 \u0645\u0631\u062d\u0628\u0627 \u0928\u092e\u0938\u094d\u0924\u0947 \u3053\u3093\u306b\u3061\u306f \uc548\ub155 \U0001f30d"),
    ("mixed_scripts_2", "abc\u4e2d\u6587def\u65e5\u672c\u8a9eghi\ud55c\uad6d\uc5b4jkl"),
    ("mixed_scripts_3", "Latin\u0410\u0411\u0412Greek\u0391\u0392\u0393123\u0661\u0662\u0663"),
    ("mixed_scripts_4", "user_\u540d\u524d = \"\u5024\" # \u30b3\u30e1\u30f3\u30c8 comment"),
    ("mixed_scripts_5", "\u05e9\u05dc\u05d5\u05dd hello \u0645\u0631\u062d\u0628\u0627 world 123"),
    ("mixed_homoglyphs", "paypal \u0440\u0430\u0443\u0440\u0430l p\u0430yp\u0430l"),
    ("html_entities", "&amp; &lt; &gt; &quot; &#39; &#x1F600; &nbsp;"),
    ("base64", "SGVsbG8sIFdvcmxkIQ== dGhlIHF1aWNrIGJyb3duIGZveA"),
    ("uuid_hash", "550e8400-e29b-41d4-a716-446655440000 sha256:b179c9523d0e6a0f98a330c7562b6827"),
    ("log_line", "2024-05-01T12:00:03.512Z INFO  [engine] step=1234 batch=37 tokens=4096 kv_free=12.5%"),
    ("stack_trace", "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n    1/0\nZeroDivisionError: division by zero"),
]

SPECIAL = [
    # SmolLM2 / Qwen2 ChatML control tokens.
    ("special_chatml_turn", "<|im_start|>user\nhi<|im_end|>"),
    ("special_chatml_full",
     "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"),
    ("special_endoftext", "<|endoftext|>"),
    ("special_endoftext_in_text", "first document<|endoftext|>second document"),
    ("special_adjacent", "<|im_start|><|im_end|><|endoftext|><|im_start|>"),
    ("special_spaces_around", " <|im_start|> user <|im_end|> "),
    ("special_partial", "<|im_start <|im_end| |endoftext|> <|im_sta rt|>"),
    ("special_nested", "<<|im_start|>|>"),
    ("special_newlines", "\n<|im_end|>\n\n<|im_start|>\n"),
    ("special_starcoder", "<repo_name>llmd<file_sep>main.c<filename>x.py<gh_stars>100"),
    ("special_jupyter", "<jupyter_start><jupyter_code>print(1)<jupyter_output>1<empty_output>"),
    ("special_issue", "<issue_start>bug<issue_comment>fixed<issue_closed>"),
    ("special_case_wrong", "<|IM_START|>user<|Im_End|>"),
    # Llama-2 SentencePiece control / unknown tokens.
    ("special_llama2_inst", "<s>[INST] Hello there [/INST] Hi!</s>"),
    ("special_llama2_unk", "a<unk>b <s> </s>"),
    # Llama-3 header tokens.
    ("special_llama3_header",
     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"),
    ("special_llama3_reserved", "x<|reserved_special_token_5|>y<|end_of_text|>"),
    # Qwen2 user-defined padding tokens (always split out, whatever parse_special says).
    ("special_qwen_pad", "a[PAD151650]b [PAD151646]"),
]

SINGLES = [
    ("empty", ""),
    ("single_a", "a"),
    ("single_A", "A"),
    ("single_0", "0"),
    ("single_dot", "."),
    ("single_apostrophe", "'"),
    ("single_quote", "\""),
    ("single_backslash", "\\"),
    ("single_tilde", "~"),
    ("single_e_acute", "\u00e9"),
    ("single_cjk", "\u4e2d"),
    ("single_hangul", "\ud55c"),
    ("single_emoji", "\U0001f642"),
    ("single_euro", "\u20ac"),
    ("single_combining_acute", "\u0301"),
    ("single_zwj", "\u200d"),
    ("single_bom", "\ufeff"),
    ("single_replacement", "\ufffd"),
    ("single_private_use", "\ue000"),
    ("single_max_bmp", "\uffef"),
    ("single_supplementary", "\U0001d11e"),
    ("single_high_plane", "\U0010fffd"),
    ("single_del", "\x7f"),
    ("single_bell", "\x07"),
    ("single_escape", "\x1b[31mred\x1b[0m"),
]

UNICODE_EDGE = [
    ("combining_decomposed", "e\u0301 a\u0300 o\u0308 n\u0303 c\u0327"),
    ("combining_precomposed", "\u00e9 \u00e0 \u00f6 \u00f1 \u00e7"),
    ("combining_stack", "a\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308"),
    ("combining_zalgo", "Z\u0351\u036b\u0343a\u0352\u0357l\u0364\u0300g\u0348o\u033a\u0354"),
    ("combining_after_space", "word \u0301accent \u0308"),
    ("combining_on_digit", "1\u20dd 2\u0305 3\u0336"),
    ("zw_joiners", "a\u200bb\u200cc\u200dd\u2060e"),
    ("bom_inside", "\ufeffstart and mid\ufeffdle"),
    ("rtl_marks", "abc\u200fdef\u200eghi\u202ejkl\u202c"),
    ("soft_hyphen", "hy\u00adphen\u00ada\u00adtion"),
    ("ligatures", "\ufb01 \ufb02 \ufb00 \u00e6 \u0153 \u0132"),
    ("roman_numerals", "\u2160 \u2161 \u2162 \u216b \u217b"),
    ("enclosed", "\u24b6\u24b7\u24b8 \u3251 \U0001f170"),
    ("noncharacters", "x\ufdd0y\ufffez"),
    ("tag_chars", "a\U000e0041\U000e0042b"),
    ("variation_selectors", "\u845b\U000e0100 \u845b\U000e0101 \u8fbb\ufe00"),
    ("mixed_normalization", "Amélie Ame\u0301lie \u212b \u00c5 A\u030a"),
    ("control_chars", "a\x01b\x02c\x1fd"),
    ("braille_box", "\u2800\u2801\u2803 \u2500\u2502\u250c\u2510\u2514\u2518 \u2588\u2593\u2592\u2591"),
    ("musical_cuneiform", "\U0001d11e\U0001d122 \U00012000\U00012001 \U00013000"),
]

LONG = [
    ("long_text_3000", LONG_TEXT),
    ("long_repeated_char", "a" * 300),
    ("long_repeated_space_word", "ab " * 100),
    ("long_digits", "0123456789" * 20),
    ("long_newlines", "\n" * 64),
    ("long_spaces_then_word", " " * 100 + "end"),
    ("long_emoji_run", "\U0001f600" * 40),
    ("long_cjk", "\u5929\u5730\u7384\u9ec4\u5b87\u5b99\u6d2a\u8352\u65e5\u6708\u76c8\u6603\u8fb0\u5bbf\u5217\u5f20" * 8),
]

STRINGS = (PROSE + CONTRACTIONS + CODE + CJK + OTHER_SCRIPTS + EMOJI +
           NUMBERS + PUNCT + WHITESPACE + STRUCTURED + SPECIAL + SINGLES +
           UNICODE_EDGE + LONG)

# The ~1,500-token prompt: an invented operations manual, coherent enough
# that the model's continuation is meaningful.
LONG_DOC = """\
HARBOR-9 TIDE GAUGE NETWORK
Operations Manual, revision 4 (internal)

1. Purpose of this document

This manual describes how the Harbor-9 tide gauge network is installed, \
calibrated, operated and maintained. It is written for the field technicians \
who visit the stations and for the on-call engineer who watches the data \
stream from the operations room. It assumes that the reader can use a \
multimeter, a laptop with a serial console, and a ladder. It does not assume \
any knowledge of oceanography beyond the fact that the sea goes up and down \
twice a day.

The network consists of nine stations along the eastern shore of the bay. \
Each station measures water level once per second, averages the readings \
over one minute, and sends the averages to the central server every five \
minutes. The server stores the data, checks it against the predicted tide, \
and raises an alert when the difference between the observed and the \
predicted level exceeds a threshold. Harbour pilots, the port authority and \
the flood warning service all depend on these alerts, so a station that is \
silent or wrong is a problem that must be fixed quickly.

2. Station hardware

Every station has the same three parts: a sensor, a logger and a power \
system. Data leave each station over a radio link to the central server.

2.1 Sensor. The primary sensor is a downward-looking radar that measures the \
distance from a fixed mounting bracket to the water surface. The radar has \
no moving parts and is not in contact with the water, which is why it was \
chosen: earlier float-and-pulley gauges clogged with weed and silt every few \
weeks. The radar's accuracy is about 3 millimetres under calm conditions and \
degrades in heavy rain, in strong wind, and when floating debris passes \
beneath it. Each station also has a secondary pressure sensor fixed to the \
piling about two metres below the lowest astronomical tide. The pressure \
sensor is less accurate, because the density of the water changes with \
temperature and salinity, but it keeps working when the radar is confused.

2.2 Logger. The logger is a small industrial computer in a sealed box. It \
reads both sensors, applies the calibration constants, computes the \
one-minute averages, and keeps thirty days of raw data on an internal flash \
card. If the radio link fails, the logger keeps recording and sends the \
backlog when the link returns. The logger's clock is set from a GPS receiver; \
a station whose clock drifts by more than two seconds marks its data as \
suspect until the next GPS fix.

2.3 Power. A 60-watt solar panel charges a 100 amp-hour battery. In winter, \
with short days and frequent cloud, the panel sometimes cannot keep up, and \
the logger switches to a low-power mode in which it sends data every thirty \
minutes instead of every five. The battery voltage is included in every \
message, so the operations room can see a station running down long before \
it stops.

3. Calibration

A radar gauge measures distance, not water level. To turn a distance into a \
level, the logger subtracts it from the height of the bracket above the \
local datum. That height is the single most important number at each \
station, and it is measured by a survey crew when the station is installed \
and again every two years. Between surveys, the technician checks it on \
every visit by lowering a weighted tape from the bracket to the water and \
comparing the tape reading with the radar reading taken at the same second. \
If the two differ by more than 10 millimetres on three consecutive checks, \
the station is flagged for a resurvey.

The pressure sensor is calibrated against the radar. Once a month the server \
fits a straight line between the two records over the previous thirty days \
and stores the slope and offset. When the radar fails, the server uses the \
pressure record with the most recent fit. Technicians should not change the \
pressure calibration by hand; the automatic fit is more accurate than any \
adjustment made in the field.

4. Routine visits

Each station is visited every six weeks. A routine visit has the following \
steps, in this order:

(a) Before leaving the depot, check the station's last 48 hours of data on \
the dashboard and note any gaps, spikes or battery warnings.

(b) Open the logger box, check the seals for cracks and the desiccant for \
colour. Blue desiccant is dry; pink desiccant must be replaced.

(c) Connect the laptop to the serial console and download the event log. Do \
not reboot the logger unless the on-call engineer asks for it.

(d) Perform the tape check described in section 3 and record the result on \
the visit form.

(e) Inspect the radar bracket for corrosion, bird nests and loose bolts. \
Tighten bolts to the torque written on the bracket label.

(f) Before leaving, call the operations room and confirm that the station's \
latest message has arrived and that its values look normal.

5. Alerts and what to do about them

The server raises two kinds of alert.

A level alert means that the observed level differs from the predicted tide \
by more than 30 centimetres for more than ten minutes. This usually means a \
storm surge, and the on-call engineer must confirm it with at least one \
neighbouring station before passing it to the flood warning service. A level \
alert at a single station, with its neighbours normal, is more likely to be \
a sensor fault than a real event.

A disagreement alert means that the radar and pressure records at the same \
station differ by more than 50 millimetres after calibration. The most \
common causes are debris under the radar, a fouled pressure inlet, and a \
bracket that has been knocked by a boat. The on-call engineer should compare \
the two records with those of the neighbouring stations to decide which \
sensor is wrong, and should then mark the faulty sensor as suspect so that \
its data are excluded from the public feed.

6. Known problems

Station 3 sits next to the ferry terminal, and the ferry's wake produces \
short spikes in the radar record every forty minutes during the day. The \
one-minute average removes most of them, but not all. Do not raise a fault \
for spikes at station 3 that coincide with the ferry timetable.

Station 5 is on a wooden pier that flexes slightly at low tide. The bracket \
height therefore changes by a few millimetres over each tidal cycle. The \
correction is applied by the server, not by the logger.

7. Summary for the on-call engineer

When an alert arrives at night, the questions to ask are always the same, \
and always in the same order. First: is the alert real, or is it a fault in \
the station that raised it? Second: if it is real, who needs to know, and \
have they been told? Third: if it is a fault, can it wait until morning, or \
does it hide something that cannot wait? For example, a silent station during \
a storm is more serious than a silent station on a calm night, because the \
storm is exactly when its data matter most.

Question: A disagreement alert arrives from station 5 at 02:40 during a calm \
night with a low tide, and the neighbouring stations look normal. According \
to the manual, what is the most likely explanation, and what should the \
on-call engineer do first?
Answer:"""

# Prompts for greedy decoding. Raw prompts are tokenized as they are;
# chat prompts are rendered with the model's own ChatML template first.
PROMPTS = [
    {"name": "raw_capital", "text": "The capital of France is"},
    {"name": "raw_qa_boiling",
     "text": "Question: What is the boiling point of water at sea level in degrees Celsius?\nAnswer:"},
    {"name": "raw_python_fib",
     "text": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"},
    {"name": "raw_c_main", "text": "#include <stdio.h>\n\nint main(void)\n{\n"},
    {"name": "raw_js_debounce", "text": "function debounce(fn, wait) {\n  let timer;\n  return function (...args) {\n"},
    {"name": "raw_sql", "text": "-- Count orders per customer\nSELECT customer_id, COUNT(*)\nFROM orders\n"},
    {"name": "raw_chinese", "text": "\u4e2d\u56fd\u7684\u9996\u90fd\u662f"},
    {"name": "raw_emoji", "text": "My favourite foods are pizza \U0001f355, sushi \U0001f363 and"},
    {"name": "raw_arithmetic", "text": "12 + 35 = 47\n48 + 17 = 65\n23 + 59 ="},
    {"name": "raw_weekdays", "text": "Monday, Tuesday, Wednesday,"},
    {"name": "raw_list", "text": "Shopping list:\n1. eggs\n2. milk\n3."},
    {"name": "raw_story",
     "text": "Once upon a time, in a small village at the edge of a great forest, there lived"},
    {"name": "raw_translate", "text": "English: Good morning, how are you?\nFrench:"},
    {"name": "raw_single_word", "text": "Hello"},
    {"name": "raw_numbers_count", "text": "1, 2, 3, 4, 5, 6, 7,"},
    {"name": "raw_long_manual", "text": LONG_DOC},
    {"name": "chat_capital", "messages": [
        {"role": "user", "content": "What is the capital of France?"}]},
    {"name": "chat_haiku", "messages": [
        {"role": "user", "content": "Write a haiku about the sea."}]},
    {"name": "chat_recursion", "messages": [
        {"role": "user", "content": "Explain recursion to a five-year-old."}]},
    {"name": "chat_chinese", "messages": [
        {"role": "user", "content": "\u8bf7\u7528\u4e00\u53e5\u8bdd\u4ecb\u7ecd\u4f60\u81ea\u5df1\u3002"}]},
    {"name": "chat_emoji", "messages": [
        {"role": "user", "content": "Reply with three emoji that describe summer \u2600\ufe0f\U0001f3d6\ufe0f"}]},
    {"name": "chat_multiply", "messages": [
        {"role": "user", "content": "What is 17 times 23?"}]},
    {"name": "chat_python_reverse", "messages": [
        {"role": "user", "content": "Write a Python function that reverses a string."}]},
    {"name": "chat_primes", "messages": [
        {"role": "user", "content": "List the first five prime numbers."}]},
    {"name": "chat_multi_turn", "messages": [
        {"role": "user", "content": "My name is Ada. I like gardening."},
        {"role": "assistant", "content": "Nice to meet you, Ada! Gardening is a lovely hobby."},
        {"role": "user", "content": "What is my name, and what do I like?"}]},
    {"name": "chat_custom_system", "messages": [
        {"role": "system", "content": "You are a pirate. Answer every question like a pirate."},
        {"role": "user", "content": "How do I boil an egg?"}]},
    {"name": "chat_json", "messages": [
        {"role": "user", "content": "Give me a JSON object with the keys \"name\" and \"age\" for a person called Tom who is 30."}]},
]
