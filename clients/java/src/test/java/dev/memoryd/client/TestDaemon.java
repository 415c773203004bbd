package dev.memoryd.client;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real memoryd for the tests: {@code python -m memoryd serve} on a free loopback port and a
 * fresh data dir (the interpreter is $MEMORYD_PYTHON, by default the repo's .venv), stopped
 * with SIGTERM. Its log goes to stderr.log beside the data dir.
 */
final class TestDaemon implements AutoCloseable {
  private static final Pattern LISTENING = Pattern.compile("listening on \\S+ \\(port (\\d+)\\)");
  private static final Pattern SERVING = Pattern.compile("memoryd serving on \\S+:(\\d+)");

  final String address;
  private final Process process;
  final Path dir;

  /**
   * Starts it with {@code env} added; returns once it serves, or with {@code untilListening}
   * as soon as its port is bound while it still loads.
   */
  TestDaemon(Map<String, String> env, boolean untilListening) throws Exception {
    dir = Files.createTempDirectory("memoryd-java-test");
    String py = System.getenv("MEMORYD_PYTHON");
    String python =
        new File(py == null || py.isEmpty() ? "../../.venv/bin/python" : py).getAbsolutePath();
    ProcessBuilder pb =
        new ProcessBuilder(
            python, "-m", "memoryd", "serve", "--listen", "127.0.0.1:0", "--data-dir",
            dir.resolve("data").toString());
    pb.directory(new File("../.."));
    pb.environment().keySet().removeIf(k -> k.startsWith("MEMORYD_"));
    pb.environment().putAll(env);
    process = pb.start();
    CompletableFuture<String> listening = new CompletableFuture<>();
    CompletableFuture<String> serving = new CompletableFuture<>();
    pump(process.getErrorStream(), dir.resolve("stderr.log"), LISTENING, listening);
    pump(process.getInputStream(), dir.resolve("stdout.log"), SERVING, serving);
    try {
      String port = (untilListening ? listening : serving).get(180, TimeUnit.SECONDS);
      address = "127.0.0.1:" + port;
    } catch (Exception e) {
      process.destroyForcibly();
      throw new IllegalStateException(
          "memoryd did not start: " + Files.readString(dir.resolve("stderr.log")), e);
    }
  }

  /** Copies a stream of the daemon to a file; completes {@code port} at the first match. */
  private static void pump(
      java.io.InputStream in, Path log, Pattern pattern, CompletableFuture<String> port) {
    Thread t =
        new Thread(
            () -> {
              try (BufferedReader r =
                      new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
                  PrintWriter out = new PrintWriter(log.toFile(), StandardCharsets.UTF_8)) {
                for (String line = r.readLine(); line != null; line = r.readLine()) {
                  out.println(line);
                  out.flush();
                  Matcher m = pattern.matcher(line);
                  if (m.find()) {
                    port.complete(m.group(1));
                  }
                }
              } catch (IOException e) {
                port.completeExceptionally(e);
              }
              port.completeExceptionally(new IllegalStateException("memoryd exited"));
            });
    t.setDaemon(true);
    t.start();
  }

  /** SIGTERM, then its exit code (-1 if it had to be killed after 30 s). */
  int stop() throws InterruptedException {
    process.destroy();
    if (!process.waitFor(30, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      return -1;
    }
    return process.exitValue();
  }

  @Override
  public void close() throws InterruptedException {
    if (process.isAlive()) {
      stop();
    }
  }
}
