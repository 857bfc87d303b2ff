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
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;

/**
 * Calls a service by its Eureka name, as any Spring Cloud service does (Eureka discovery, Spring
 * Cloud LoadBalancer, a @LoadBalanced RestClient), at a steady rate, and serves what happened on
 * GET /stats: successes, failures, the last error and which instances answered.
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

    private final AtomicLong ok = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicReference<String> lastError = new AtomicReference<>("");
    private final Map<String, AtomicLong> byInstance = new ConcurrentHashMap<>();
    private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();

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

    private RestClient restClient;

    SpringClientApplication(RestClient.Builder builder) {
        this.restClient = builder.build();
    }

    @Override
    public void run(String... args) {
        if (!service.isEmpty()) {
            scheduler.scheduleWithFixedDelay(this::callOnce, 0, intervalMs, TimeUnit.MILLISECONDS);
        }
    }

    @GetMapping(value = "/", produces = "text/plain")
    String whoAmI() {
        return name + "\n";
    }

    /** A call that took longer than this is logged although it succeeded. */
    private static final Duration SLOW = Duration.ofSeconds(1);

    private void callOnce() {
        Instant began = Instant.now();
        try {
            String body = restClient.get().uri("http://" + service + path).retrieve().body(String.class);
            ok.incrementAndGet();
            String who = body == null ? "" : body.trim();
            byInstance.computeIfAbsent(who, k -> new AtomicLong()).incrementAndGet();
            Duration took = Duration.between(began, Instant.now());
            if (took.compareTo(SLOW) > 0) {
                System.out.println("call slow began=" + began + " took=" + took.toMillis() + "ms answered-by=" + who);
            }
        } catch (RuntimeException e) {
            failed.incrementAndGet();
            // When the call began and how long it took: a test lines a
            // failure up with what it did to the pods at that moment. Every
            // failure is logged (stdout, the process's log, which a failed
            // test keeps); /stats keeps the last.
            long tookMs = Duration.between(began, Instant.now()).toMillis();
            String error = e.getClass().getSimpleName() + ": " + e.getMessage();
            lastError.set(error + " (call began " + began + ", failed after " + tookMs + " ms)");
            System.out.println("call failed began=" + began + " took=" + tookMs + "ms error=" + error
                    + (e.getCause() != null ? " cause=" + e.getCause() : ""));
        }
    }

    @GetMapping(value = "/stats", produces = "application/json")
    Map<String, Object> stats() {
        Map<String, Long> answered = new java.util.TreeMap<>();
        byInstance.forEach((k, v) -> answered.put(k, v.get()));
        return Map.of("ok", ok.get(), "failed", failed.get(), "lastError", lastError.get(), "byInstance", answered);
    }
}
