package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.File;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A daemon serving TLS (the test certificate of tests/conformance/tls): a client trusting the
 * test CA gets answers; a plaintext client gets none.
 */
class TlsTest {
  @Test
  void tls() throws Exception {
    File dir = new File("../../tests/conformance/tls").getAbsoluteFile();
    Map<String, String> env =
        Map.of(
            "MEMORYD_AUTH_TOKEN", "tls-token-for-the-tests",
            "MEMORYD_SERVER__TLS_CERT", new File(dir, "server.crt").getPath(),
            "MEMORYD_SERVER__TLS_KEY", new File(dir, "server.key").getPath());
    try (TestDaemon daemon = new TestDaemon(env, false)) {
      try (MemorydClient secure =
          MemorydClient.builder()
              .address(daemon.address)
              .token("tls-token-for-the-tests")
              .tls(new File(dir, "ca.crt"))
              .build()) {
        assertEquals(384, secure.stats("tls").getEmbeddingDim());
      }
      try (MemorydClient plain =
          MemorydClient.builder()
              .address(daemon.address)
              .token("tls-token-for-the-tests")
              .retries(0)
              .timeout(Duration.ofSeconds(5))
              .build()) {
        assertThrows(MemorydException.class, () -> plain.stats("tls"));
      }
      assertEquals(0, daemon.stop(), "memoryd's exit code on SIGTERM");
    }
  }
}
