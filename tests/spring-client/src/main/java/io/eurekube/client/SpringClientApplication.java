package io.eurekube.client;

import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.CommandLineRunner;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.context.annotation.Bean;
import org.springframework.http.HttpStatus;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.web.bind.annotation.DeleteMapping;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;
import org.springframework.web.server.ResponseStatusException;

/**
 * Calls a service by its Eureka name, as any Spring Cloud service does (Eureka discovery, Spring
 * Cloud LoadBalancer, a @LoadBalanced RestClient), at a steady rate, and serves what happened on
 * GET /stats: successes, failures, the last error and which instances answered.
 *
 * <p>More callers, each a service of its own called at its own rate through the same Eureka
 * client and load balancer (as one Spring service calls several), start with POST
 * /callers?service=…&path=…&interval-ms=…, which answers the caller's id; GET /callers/{id}/stats
 * says what it has seen and DELETE /callers/{id} stops it. A test suite then starts one JVM for
 * all its stories instead of one each.
 *
 * <p>Registered with Eureka (eureka.client.register-with-eureka=true) and named by
 * eurekube.client.name, it also plays a service running on a VM: GET / answers that name, as the
 * test app in a pod answers its pod name. With no eurekube.client.service it calls nothing.
 */
@SpringBootApplication
@RestController
public class SpringClientApplication implements CommandLineRunner {

    public static void main(String[] args) {
        SpringApplication.run(SpringClientApplication.class, args);
    }

    @Value("${eurekube.client.service:}")
    private String service;

    @Value("${eurekube.client.name:${spring.application.name}}")
    private String name;

    @Value("${eurekube.client.path:/}")
    private String path;

    @Value("${eurekube.client.interval-ms:20}")
    private long intervalMs;

    /** The caller eurekube.client.service names, whose stats GET /stats serves. */
    private volatile Caller main;

    private final Map<String, Caller> callers = new ConcurrentHashMap<>();
    private final AtomicLong lastId = new AtomicLong();

    @Bean
    @LoadBalanced
    static RestClient.Builder loadBalancedRestClientBuilder() {
        SimpleClientHttpRequestFactory factory = new SimpleClientHttpRequestFactory();
        factory.setConnectTimeout(Duration.ofSeconds(1));
        // 3 s: a pod slowed by a loaded two-core machine still answers
        // within it (2 s timed out once in 914 calls at load 30); the drain
        // sum in tests/cluster/doc.go counts it.
        factory.setReadTimeout(Duration.ofSeconds(3));
        return RestClient.builder().requestFactory(factory);
    }

    private final RestClient restClient;

    SpringClientApplication(RestClient.Builder builder) {
        this.restClient = builder.build();
    }

    @Override
    public void run(String... args) {
        if (!service.isEmpty()) {
            main = new Caller(restClient, service, path, intervalMs);
        }
    }

    @GetMapping(value = "/", produces = "text/plain")
    String whoAmI() {
        return name + "\n";
    }

    @GetMapping(value = "/stats", produces = "application/json")
    Map<String, Object> stats() {
        return main == null ? Caller.NONE : main.stats();
    }

    @PostMapping(value = "/callers", produces = "application/json")
    Map<String, String> startCaller(@RequestParam String service, @RequestParam(defaultValue = "/") String path,
            @RequestParam(name = "interval-ms", defaultValue = "20") long intervalMs) {
        if (service.isBlank() || !path.startsWith("/") || intervalMs <= 0) {
            throw new ResponseStatusException(HttpStatus.BAD_REQUEST,
                    "want a service, a path that begins with / and an interval-ms above 0");
        }
        String id = Long.toString(lastId.incrementAndGet());
        callers.put(id, new Caller(restClient, service, path, intervalMs));
        return Map.of("id", id);
    }

    @GetMapping(value = "/callers/{id}/stats", produces = "application/json")
    Map<String, Object> callerStats(@PathVariable String id) {
        return caller(id).stats();
    }

    @DeleteMapping("/callers/{id}")
    Map<String, Object> stopCaller(@PathVariable String id) {
        Caller c = caller(id);
        callers.remove(id);
        c.stop();
        return c.stats();
    }

    private Caller caller(String id) {
        Caller c = callers.get(id);
        if (c == null) {
            throw new ResponseStatusException(HttpStatus.NOT_FOUND, "no caller " + id);
        }
        return c;
    }

    /** One service called at a steady rate on a thread of its own, and what happened. */
    static final class Caller {
        static final Map<String, Object> NONE = Map.of("ok", 0L, "failed", 0L, "lastError", "", "byInstance", Map.of());

        /** A call that took longer than this is logged although it succeeded. */
        private static final Duration SLOW = Duration.ofSeconds(1);

        private final RestClient restClient;
        private final String service;
        private final String uri;
        private final AtomicLong ok = new AtomicLong();
        private final AtomicLong failed = new AtomicLong();
        private final AtomicReference<String> lastError = new AtomicReference<>("");
        private final Map<String, AtomicLong> byInstance = new ConcurrentHashMap<>();
        // A thread each: one service's slow answers never delay another's calls.
        private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();

        Caller(RestClient restClient, String service, String path, long intervalMs) {
            this.restClient = restClient;
            this.service = service;
            this.uri = "http://" + service + path;
            scheduler.scheduleWithFixedDelay(this::callOnce, 0, intervalMs, TimeUnit.MILLISECONDS);
        }

        void stop() {
            scheduler.shutdownNow();
        }

        private void callOnce() {
            Instant began = Instant.now();
            try {
                String body = restClient.get().uri(uri).retrieve().body(String.class);
                ok.incrementAndGet();
                String who = body == null ? "" : body.trim();
                byInstance.computeIfAbsent(who, k -> new AtomicLong()).incrementAndGet();
                Duration took = Duration.between(began, Instant.now());
                if (took.compareTo(SLOW) > 0) {
                    System.out.println("call slow service=" + service + " began=" + began + " took=" + took.toMillis()
                            + "ms answered-by=" + who);
                }
            } catch (RuntimeException e) {
                failed.incrementAndGet();
                // When the call began and how long it took: a test lines a
                // failure up with what it did to the pods at that moment.
                // Every failure is logged (stdout, the process's log, which a
                // failed test keeps); the stats keep the last.
                long tookMs = Duration.between(began, Instant.now()).toMillis();
                String error = e.getClass().getSimpleName() + ": " + e.getMessage();
                lastError.set(error + " (call began " + began + ", failed after " + tookMs + " ms)");
                System.out.println("call failed service=" + service + " began=" + began + " took=" + tookMs + "ms error="
                        + error + (e.getCause() != null ? " cause=" + e.getCause() : ""));
            }
        }

        Map<String, Object> stats() {
            Map<String, Long> answered = new java.util.TreeMap<>();
            byInstance.forEach((k, v) -> answered.put(k, v.get()));
            return Map.of("ok", ok.get(), "failed", failed.get(), "lastError", lastError.get(), "byInstance", answered);
        }
    }
}
