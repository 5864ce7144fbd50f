"""tests/compat/test_openai.py — llmd through the official openai Python SDK.

What a team's existing code does against OpenAI must work unchanged against
llmd: the SDK parses every response into its own types (so a missing or
mistyped field fails here), raises its own exception class per status, and
consumes streams with its own SSE decoder.  Generation is kept short
(max_tokens 8-24) because the tests run on CPU.

Tenants of the shared daemon: alice (no caps), off (disabled), slow (one
request per minute), capped (priority ceiling 3).
"""

import json
import signal
import ssl
import time
import unittest

import openai

import harness

D = None  # the shared daemon


def setUpModule():
    global D
    D = harness.Daemon(
        tenants={"alice": [], "off": [], "slow": ["--rpm", "1"], "capped": ["--max-priority", "3"]},
        disabled=["off"],
        extra_args=["--max-body-bytes", str(MAX_BODY)])


def tearDownModule():
    if D is not None:
        D.shutdown_checked()


MAX_BODY = 65536
CHAT = [{"role": "user", "content": "Write one sentence about the sea."}]
PROMPT = "Once upon a time, there was a"


def make_client(daemon, key, **kw):
    """The SDK as a user would set it up for a private CA; no retries, so
    the status a test provokes is the one it sees."""
    ctx = ssl.create_default_context(cafile=daemon.cert)
    return openai.OpenAI(base_url=daemon.url + "/v1", api_key=key,
                         http_client=openai.DefaultHttpxClient(verify=ctx), max_retries=0,
                         timeout=120, **kw)


class SDKTestCase(harness.DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = D
        cls.client = make_client(D, D.keys["alice"])

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def chat(self, **kw):
        kw.setdefault("model", D.model)
        kw.setdefault("messages", CHAT)
        kw.setdefault("max_tokens", 16)
        return self.client.chat.completions.create(**kw)

    def complete(self, **kw):
        kw.setdefault("model", D.model)
        kw.setdefault("prompt", PROMPT)
        kw.setdefault("max_tokens", 16)
        return self.client.completions.create(**kw)

    def chat_stream_text(self, **kw):
        """Iterates a chat stream; returns (text per choice, finish per
        choice, the chunks)."""
        chunks = list(self.chat(stream=True, **kw))
        texts, finish = {}, {}
        for c in chunks:
            for ch in c.choices:
                texts[ch.index] = texts.get(ch.index, "") + (ch.delta.content or "")
                if ch.finish_reason is not None:
                    self.assertNotIn(ch.index, finish, "two finish_reasons for one choice")
                    finish[ch.index] = ch.finish_reason
        return texts, finish, chunks

    def complete_stream_text(self, **kw):
        chunks = list(self.complete(stream=True, **kw))
        texts, finish = {}, {}
        for c in chunks:
            for ch in c.choices:
                texts[ch.index] = texts.get(ch.index, "") + ch.text
                if ch.finish_reason is not None:
                    finish[ch.index] = ch.finish_reason
        return texts, finish, chunks

    def assertUsage(self, u, max_tokens):
        self.assertIsNotNone(u)
        self.assertGreater(u.prompt_tokens, 0)
        self.assertGreater(u.completion_tokens, 0)
        self.assertLessEqual(u.completion_tokens, max_tokens)
        self.assertEqual(u.total_tokens, u.prompt_tokens + u.completion_tokens)


class TestModels(SDKTestCase):
    def test_models_list_has_the_served_model(self):
        ids = [m.id for m in self.client.models.list()]
        self.assertIn(D.model, ids)

    def test_ready_line_logged(self):
        self.assertIn("llmd: ready", D.log_text())


class TestChat(SDKTestCase):
    def test_non_streaming(self):
        raw = self.client.chat.completions.with_raw_response.create(
            model=D.model, messages=CHAT, max_tokens=16, user="compat-test")
        r = raw.parse()
        self.assertEqual(r.object, "chat.completion")
        self.assertTrue(r.id.startswith("chatcmpl-"), r.id)
        self.assertEqual(raw.headers.get("llmd-request-id"), r.id)
        self.assertEqual(r.model, D.model)
        self.assertEqual(len(r.choices), 1)
        ch = r.choices[0]
        self.assertEqual(ch.index, 0)
        self.assertEqual(ch.message.role, "assistant")
        self.assertIsInstance(ch.message.content, str)
        self.assertIn(ch.finish_reason, ("stop", "length"))
        self.assertUsage(r.usage, 16)
        if ch.finish_reason == "length":
            self.assertEqual(r.usage.completion_tokens, 16)

    def test_max_completion_tokens(self):
        r = self.client.chat.completions.create(model=D.model, messages=CHAT,
                                                max_completion_tokens=5, temperature=0)
        self.assertLessEqual(r.usage.completion_tokens, 5)

    def test_streaming_with_usage_on_last_chunk(self):
        texts, finish, chunks = self.chat_stream_text(
            max_tokens=12, stream_options={"include_usage": True})
        self.assertGreaterEqual(len(chunks), 2)
        ids = {c.id for c in chunks}
        self.assertEqual(len(ids), 1, "every chunk carries the same id")
        self.assertTrue(chunks[0].id.startswith("chatcmpl-"))
        for c in chunks:
            self.assertEqual(c.object, "chat.completion.chunk")
            self.assertEqual(c.model, D.model)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        last = chunks[-1]
        self.assertEqual(last.choices, [])
        self.assertUsage(last.usage, 12)
        for c in chunks[:-1]:
            self.assertIsNone(c.usage)
        self.assertEqual(set(finish), {0})
        self.assertIn(finish[0], ("stop", "length"))

    def test_streaming_without_usage(self):
        texts, finish, chunks = self.chat_stream_text(max_tokens=8)
        for c in chunks:
            self.assertIsNone(c.usage)
            self.assertGreaterEqual(len(c.choices), 1)
        self.assertIn(finish.get(0), ("stop", "length"))

    def test_temperature_zero_stream_equals_non_stream(self):
        r = self.chat(temperature=0, max_tokens=20)
        texts, finish, _ = self.chat_stream_text(temperature=0, max_tokens=20)
        self.assertEqual(texts.get(0, ""), r.choices[0].message.content)
        self.assertEqual(finish[0], r.choices[0].finish_reason)

    def test_n2(self):
        r = self.chat(n=2, temperature=1, seed=7, max_tokens=12)
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1])
        for c in r.choices:
            self.assertIsInstance(c.message.content, str)
            self.assertIn(c.finish_reason, ("stop", "length"))
        self.assertLessEqual(r.usage.completion_tokens, 24)
        again = self.chat(n=2, temperature=1, seed=7, max_tokens=12)
        self.assertEqual([c.message.content for c in sorted(r.choices, key=lambda c: c.index)],
                         [c.message.content for c in sorted(again.choices, key=lambda c: c.index)])

    def test_n2_streaming(self):
        texts, finish, chunks = self.chat_stream_text(
            n=2, temperature=1, seed=7, max_tokens=12, stream_options={"include_usage": True})
        self.assertEqual(set(finish), {0, 1})
        ref = self.chat(n=2, temperature=1, seed=7, max_tokens=12)
        for c in ref.choices:
            self.assertEqual(texts.get(c.index, ""), c.message.content)
        self.assertLessEqual(chunks[-1].usage.completion_tokens, 24)

    def test_seed_reproducible(self):
        a = self.chat(temperature=1, seed=1234, max_tokens=16)
        b = self.chat(temperature=1, seed=1234, max_tokens=16)
        self.assertEqual(a.choices[0].message.content, b.choices[0].message.content)

    def test_different_seeds_differ(self):
        texts = {self.chat(temperature=1, seed=s, max_tokens=16).choices[0].message.content
                 for s in (1, 2, 3, 4, 5)}
        self.assertGreater(len(texts), 1, "five seeds at temperature 1 gave one text")

    def test_stop_string(self):
        full = self.chat(temperature=0, max_tokens=24).choices[0].message.content
        stop, cut = pick_stop(full)
        if stop is None:
            self.skipTest("greedy reply too short to pick a stop string: %r" % full)
        r = self.chat(temperature=0, max_tokens=24, stop=[stop])
        self.assertEqual(r.choices[0].message.content, full[:cut])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        texts, finish, _ = self.chat_stream_text(temperature=0, max_tokens=24, stop=stop)
        self.assertEqual(texts.get(0, ""), full[:cut])
        self.assertEqual(finish[0], "stop")

    def test_logprobs(self):
        r = self.chat(temperature=0, max_tokens=8, logprobs=True, top_logprobs=2)
        ch = r.choices[0]
        lp = ch.logprobs.content
        self.assertEqual(len(lp), r.usage.completion_tokens)
        for e in lp:
            self.assertLessEqual(e.logprob, 0.0)
            self.assertEqual(len(e.top_logprobs), 2)
            self.assertGreaterEqual(e.top_logprobs[0].logprob, e.top_logprobs[1].logprob)
            # greedy: the chosen token is the most likely one
            self.assertEqual(e.token, e.top_logprobs[0].token)
            self.assertAlmostEqual(e.logprob, e.top_logprobs[0].logprob, places=4)
            self.assertIsNotNone(e.bytes)
        self.assertEqual(b"".join(bytes(e.bytes) for e in lp), ch.message.content.encode())

    def test_logprobs_streaming(self):
        chunks = list(self.chat(stream=True, temperature=0, max_tokens=8, logprobs=True,
                                top_logprobs=1))
        entries = [e for c in chunks for ch in c.choices if ch.logprobs and ch.logprobs.content
                   for e in ch.logprobs.content]
        ref = self.chat(temperature=0, max_tokens=8, logprobs=True, top_logprobs=1)
        self.assertEqual([e.token for e in entries],
                         [e.token for e in ref.choices[0].logprobs.content])

    def test_priority_clamped_to_tenant_ceiling(self):
        c = make_client(D, D.keys["capped"])
        try:
            raw = c.chat.completions.with_raw_response.create(
                model=D.model, messages=CHAT, max_tokens=4, extra_body={"priority": 0})
            self.assertEqual(raw.headers.get("llmd-priority", "").replace(" ", ""),
                             "3;clamped-from=0")
            raw.parse()
        finally:
            c.close()
        raw = self.client.chat.completions.with_raw_response.create(
            model=D.model, messages=CHAT, max_tokens=4, extra_body={"priority": 2})
        self.assertNotIn("clamped-from", raw.headers.get("llmd-priority", ""))
        raw.parse()


def pick_stop(text):
    """A two-character stop string whose first occurrence is inside the
    text (not at its start): (stop, index) or (None, None)."""
    for i in range(max(1, len(text) // 3), len(text) - 1):
        s = text[i:i + 2]
        if s.strip() and text.find(s) == i:
            return s, i
    return None, None


class TestCompletions(SDKTestCase):
    def test_non_streaming(self):
        raw = self.client.completions.with_raw_response.create(
            model=D.model, prompt=PROMPT, max_tokens=16)
        r = raw.parse()
        self.assertEqual(r.object, "text_completion")
        self.assertTrue(r.id.startswith("cmpl-"), r.id)
        self.assertEqual(raw.headers.get("llmd-request-id"), r.id)
        self.assertEqual(len(r.choices), 1)
        self.assertIsInstance(r.choices[0].text, str)
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
        self.assertUsage(r.usage, 16)

    def test_streaming_with_usage(self):
        texts, finish, chunks = self.complete_stream_text(
            max_tokens=12, stream_options={"include_usage": True})
        self.assertEqual(len({c.id for c in chunks}), 1)
        for c in chunks:
            self.assertEqual(c.object, "text_completion")
        self.assertEqual(chunks[-1].choices, [])
        self.assertUsage(chunks[-1].usage, 12)
        self.assertIn(finish.get(0), ("stop", "length"))

    def test_temperature_zero_stream_equals_non_stream(self):
        r = self.complete(temperature=0, max_tokens=20)
        texts, finish, _ = self.complete_stream_text(temperature=0, max_tokens=20)
        self.assertEqual(texts.get(0, ""), r.choices[0].text)
        self.assertEqual(finish[0], r.choices[0].finish_reason)

    def test_prompt_array_gives_one_choice_per_prompt(self):
        prompts = [PROMPT, "The capital of France is"]
        r = self.complete(prompt=prompts, temperature=0, max_tokens=8)
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1])
        by_index = {c.index: c.text for c in r.choices}
        for i, p in enumerate(prompts):
            self.assertEqual(by_index[i], self.complete(prompt=p, temperature=0,
                                                        max_tokens=8).choices[0].text)

    def test_n2_and_seed(self):
        a = self.complete(n=2, temperature=1, seed=99, max_tokens=12)
        b = self.complete(n=2, temperature=1, seed=99, max_tokens=12)
        self.assertEqual(sorted(c.index for c in a.choices), [0, 1])
        self.assertEqual({c.index: c.text for c in a.choices}, {c.index: c.text for c in b.choices})
        texts = {self.complete(temperature=1, seed=s, max_tokens=16).choices[0].text
                 for s in (11, 12, 13, 14, 15)}
        self.assertGreater(len(texts), 1)

    def test_stop_string(self):
        full = self.complete(temperature=0, max_tokens=24).choices[0].text
        stop, cut = pick_stop(full)
        if stop is None:
            self.skipTest("greedy continuation too short to pick a stop string: %r" % full)
        r = self.complete(temperature=0, max_tokens=24, stop=[stop])
        self.assertEqual(r.choices[0].text, full[:cut])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        texts, finish, _ = self.complete_stream_text(temperature=0, max_tokens=24, stop=[stop])
        self.assertEqual(texts.get(0, ""), full[:cut])
        self.assertEqual(finish[0], "stop")

    def test_logprobs(self):
        r = self.complete(temperature=0, max_tokens=8, logprobs=2)
        ch = r.choices[0]
        lp = ch.logprobs
        n = r.usage.completion_tokens
        self.assertEqual(len(lp.tokens), n)
        self.assertEqual(len(lp.token_logprobs), n)
        self.assertEqual(len(lp.top_logprobs), n)
        self.assertEqual(len(lp.text_offset), n)
        for tok, l, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            self.assertLessEqual(l, 0.0)
            self.assertIn(tok, top)
            self.assertAlmostEqual(max(top.values()), l, places=4)
        self.assertEqual(lp.text_offset, sorted(lp.text_offset))
        if ch.text.isascii():
            self.assertEqual("".join(lp.tokens), ch.text)


class TestErrors(SDKTestCase):
    def assertErrorBody(self, e):
        """OpenAI's shape: e.body is the "error" object."""
        self.assertIsInstance(e.body, dict, e.body)
        for k in ("message", "type", "param", "code"):
            self.assertIn(k, e.body)
        self.assertIsInstance(e.body["message"], str)
        self.assertTrue(e.body["message"])
        self.assertIsInstance(e.body["type"], str)

    def test_bad_key_is_authentication_error(self):
        c = make_client(D, "sk-llmd-not-a-real-key")
        try:
            with self.assertRaises(openai.AuthenticationError) as cm:
                c.chat.completions.create(model=D.model, messages=CHAT, max_tokens=4)
        finally:
            c.close()
        self.assertEqual(cm.exception.status_code, 401)
        self.assertErrorBody(cm.exception)

    def test_revoked_key_is_authentication_error(self):
        D.admin("tenant", "add", "revokee")
        k = D.admin("key", "create", "revokee", json_out=True)
        c = make_client(D, k["key"])
        try:
            # the daemon picks up a new key within about a second
            deadline = time.monotonic() + 10
            while True:
                try:
                    c.completions.create(model=D.model, prompt="Hi", max_tokens=1)
                    break
                except openai.AuthenticationError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            D.admin("key", "revoke", str(k["id"]))
            deadline = time.monotonic() + 10
            with self.assertRaises(openai.AuthenticationError):
                while time.monotonic() < deadline:
                    c.completions.create(model=D.model, prompt="Hi", max_tokens=1)
                    time.sleep(0.2)
        finally:
            c.close()

    def test_disabled_tenant_is_permission_denied(self):
        c = make_client(D, D.keys["off"])
        try:
            with self.assertRaises(openai.PermissionDeniedError) as cm:
                c.chat.completions.create(model=D.model, messages=CHAT, max_tokens=4)
        finally:
            c.close()
        self.assertEqual(cm.exception.status_code, 403)
        self.assertErrorBody(cm.exception)

    def test_unknown_model_is_not_found(self):
        with self.assertRaises(openai.NotFoundError) as cm:
            self.chat(model="no-such-model")
        self.assertEqual(cm.exception.status_code, 404)
        self.assertErrorBody(cm.exception)
        self.assertEqual(cm.exception.code, "model_not_found")
        with self.assertRaises(openai.NotFoundError) as cm:
            self.complete(model="no-such-model")
        self.assertEqual(cm.exception.code, "model_not_found")

    def test_bad_temperature_is_bad_request_naming_the_param(self):
        with self.assertRaises(openai.BadRequestError) as cm:
            self.chat(temperature=-1)
        e = cm.exception
        self.assertEqual(e.status_code, 400)
        self.assertErrorBody(e)
        self.assertEqual(e.body["param"], "temperature")
        self.assertEqual(e.param, "temperature")

    def test_other_bad_fields_name_the_param(self):
        for kw, param in (({"top_p": 5}, "top_p"), ({"n": 0}, "n"),
                          ({"max_tokens": -3}, "max_tokens")):
            with self.subTest(param=param):
                with self.assertRaises(openai.BadRequestError) as cm:
                    self.chat(**kw)
                self.assertEqual(cm.exception.body.get("param"), param)
        with self.assertRaises(openai.BadRequestError) as cm:
            self.chat(stream=True, temperature=9)
        self.assertEqual(cm.exception.body.get("param"), "temperature")

    def test_rate_limit(self):
        c = make_client(D, D.keys["slow"])
        try:
            c.chat.completions.create(model=D.model, messages=CHAT, max_tokens=4)
            with self.assertRaises(openai.RateLimitError) as cm:
                c.chat.completions.create(model=D.model, messages=CHAT, max_tokens=4)
        finally:
            c.close()
        e = cm.exception
        self.assertEqual(e.status_code, 429)
        self.assertErrorBody(e)
        retry = e.response.headers.get("retry-after")
        self.assertIsNotNone(retry, "429 without Retry-After")
        self.assertTrue(retry.isdigit() and int(retry) >= 1, retry)

    def test_huge_body_is_413(self):
        body = json.dumps({"model": D.model, "max_tokens": 4,
                           "messages": [{"role": "user", "content": "x" * (4 * MAX_BODY)}]})
        ctx = ssl.create_default_context(cafile=D.cert)
        with openai.DefaultHttpxClient(verify=ctx, timeout=60) as http:
            r = http.post(D.url + "/v1/chat/completions", content=body.encode(),
                          headers={"Authorization": "Bearer " + D.keys["alice"],
                                   "Content-Type": "application/json"})
        self.assertEqual(r.status_code, 413)
        err = r.json()["error"]
        self.assertIsInstance(err["message"], str)
        # the SDK maps the same status to its generic status error
        c = make_client(D, D.keys["alice"])
        try:
            with self.assertRaises(openai.APIStatusError) as cm:
                c.chat.completions.create(model=D.model, max_tokens=4, messages=[
                    {"role": "user", "content": "x" * (4 * MAX_BODY)}])
        finally:
            c.close()
        self.assertEqual(cm.exception.status_code, 413)

    def test_daemon_still_serves_after_errors(self):
        self.assertEqual(D.get("/health")[0], 200)
        self.assertTrue(self.chat(max_tokens=4).choices)


class TestStreamError(harness.DaemonTestCase):
    """A stream cut by a drain that outlasts --drain-timeout must end with an
    SSE error event, which the SDK raises as openai.APIError while the
    stream is iterated.  Its own daemon: this test stops it."""

    @classmethod
    def setUpClass(cls):
        cls.daemon = harness.Daemon(tenants={"alice": []}, extra_args=["--drain-timeout", "1"])

    @classmethod
    def tearDownClass(cls):
        cls.daemon.shutdown_checked()

    def test_error_event_mid_stream_raises_api_error(self):
        d = self.daemon
        c = make_client(d, d.keys["alice"])
        got = []
        try:
            stream = c.completions.create(model=d.model, prompt="1, 2, 3, 4, 5, 6, 7, 8,",
                                          max_tokens=2000, temperature=0, stream=True)
            finished = None
            with self.assertRaises(openai.APIError,
                                   msg="a stream cut by the drain ended without an error event"
                                   ) as cm:
                for chunk in stream:
                    if not got:
                        d.proc.send_signal(signal.SIGTERM)
                    got.append(chunk)
                    for ch in chunk.choices:
                        finished = ch.finish_reason or finished
                if finished:
                    self.skipTest("the stream finished (%s) before the drain timeout" % finished)
        finally:
            c.close()
        e = cm.exception
        self.assertNotIsInstance(e, openai.APIConnectionError, "the stream was cut, not ended")
        self.assertIsInstance(e.body, dict)
        self.assertTrue(e.body.get("message"))
        self.assertGreater(len(got), 0)
        self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
