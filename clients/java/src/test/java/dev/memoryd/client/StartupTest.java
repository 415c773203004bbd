package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.memoryd.v1.StoreRequest;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** While memoryd loads it answers UNAVAILABLE; idempotent calls ride that out with retries. */
class StartupTest {
  private static final String TOKEN = "startup-token";

  @Test
  void retriesOutlastADaemonThatIsStarting() throws Exception {
    Path data = Files.createTempDirectory("memoryd-java-startup");
    String py = System.getenv("MEMORYD_PYTHON");
    String python =
        new File(py == null || py.isEmpty() ? "../../.venv/bin/python" : py).getAbsolutePath();
    ProcessBuilder pb =
        new ProcessBuilder(
            python, "-m", "memoryd", "serve", "--listen", "127.0.0.1:0", "--data-dir",
            data.resolve("data").toString());
    pb.directory(new File("../.."));
    pb.environment().keySet().removeIf(k -> k.startsWith("MEMORYD_"));
    pb.environment().put("MEMORYD_AUTH_TOKEN", TOKEN);
    pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
    Process daemon = pb.start();
    // The log goes to a file; its "listening on ... (port N)" line gives the port.
    CompletableFuture<String> port = new CompletableFuture<>();
    Thread reader =
        new Thread(
            () -> {
              Pattern listening = Pattern.compile("listening on \\S+ \\(port (\\d+)\\)");
              try (BufferedReader err =
                      new BufferedReader(
                          new InputStreamReader(daemon.getErrorStream(), StandardCharsets.UTF_8));
                  PrintWriter log = new PrintWriter(data.resolve("stderr.log").toFile())) {
                for (String line = err.readLine(); line != null; line = err.readLine()) {
                  log.println(line);
                  Matcher m = listening.matcher(line);
                  if (m.find()) {
                    port.complete(m.group(1));
                  }
                }
              } catch (Exception e) {
                port.completeExceptionally(e);
              }
              port.completeExceptionally(new IllegalStateException("memoryd exited"));
            });
    reader.setDaemon(true);
    reader.start();
    try {
      String address = "127.0.0.1:" + port.get(180, TimeUnit.SECONDS);
      try (MemorydClient impatient =
          MemorydClient.builder().address(address).token(TOKEN).retries(0).build()) {
        MemorydException e =
            assertThrows(
                MemorydException.class,
                () ->
                    impatient.store(
                        StoreRequest.newBuilder()
                            .setAgentId("boot")
                            .setText("written during start-up")
                            .build()));
        assertEquals("UNAVAILABLE", e.codeName(), e.getMessage());
      }
      try (MemorydClient patient =
          MemorydClient.builder()
              .address(address)
              .token(TOKEN)
              .retries(1000)
              .maxBackoff(Duration.ofMillis(500))
              .timeout(Duration.ofSeconds(120))
              .build()) {
        assertEquals(0, patient.stats("boot").getTotal(), "the Store during start-up wrote nothing");
      }
    } finally {
      daemon.destroy();
      if (!daemon.waitFor(30, TimeUnit.SECONDS)) {
        daemon.destroyForcibly();
        fail("memoryd did not stop within 30 s of SIGTERM");
      }
    }
    assertEquals(0, daemon.exitValue(), "memoryd's exit code");
  }

  @Test
  void theDeadlineBoundsRetries() {
    try (MemorydClient c =
        MemorydClient.builder()
            .address("127.0.0.1:1")
            .retries(1000)
            .timeout(Duration.ofMillis(700))
            .build()) {
      long start = System.nanoTime();
      MemorydException e = assertThrows(MemorydException.class, () -> c.stats("main"));
      assertTrue(System.nanoTime() - start < 5_000_000_000L, "took past the 700 ms deadline");
      assertTrue(
          e.codeName().equals("UNAVAILABLE") || e.codeName().equals("DEADLINE_EXCEEDED"),
          e.getMessage());
    }
  }
}
