package io.eurekube.k8sclient;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
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
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.discovery.DiscoveryClient;
import org.springframework.cloud.client.discovery.composite.CompositeDiscoveryClient;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.context.annotation.Bean;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;

/**
 * Calls a service by its Kubernetes name, as a Spring Cloud Kubernetes app does (the official
 * Kubernetes Java client flavour: its DiscoveryClient and its Spring Cloud LoadBalancer
 * supplier, a @LoadBalanced RestClient), at a steady rate, from a pod, with nothing but the
 * pod's service account (in-cluster config). It serves what happened on GET /stats, in the shape
 * of tests/spring-client: successes, failures, the last error and which instances answered
 * (each answers its name). GET /discovery says what the DiscoveryClient itself sees: the
 * services of the namespace and the instances of eurekube.client.service, or what it threw.
 */
@SpringBootApplication
@RestController
public class SpringK8sClientApplication implements CommandLineRunner {

    public static void main(String[] args) {
        SpringApplication.run(SpringK8sClientApplication.class, args);
    }

    @Value("${eurekube.client.service:}")
    private String service;

    @Value("${eurekube.client.path:/}")
    private String path;

    @Value("${eurekube.client.interval-ms:100}")
    private long intervalMs;

    private final AtomicLong ok = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicReference<String> lastError = new AtomicReference<>("");
    private final Map<String, AtomicLong> byInstance = new ConcurrentHashMap<>();
    private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();

    @Bean
    @LoadBalanced
    static RestClient.Builder loadBalancedRestClientBuilder() {
        // Bounded as the test's other callers are: a refused or reset call fails at once and
        // counts; a VM's JVM slow to answer on a loaded two-core machine does not.
        SimpleClientHttpRequestFactory factory = new SimpleClientHttpRequestFactory();
        factory.setConnectTimeout(Duration.ofSeconds(2));
        factory.setReadTimeout(Duration.ofSeconds(10));
        return RestClient.builder().requestFactory(factory);
    }

    private final RestClient restClient;
    private final DiscoveryClient discoveryClient;

    SpringK8sClientApplication(RestClient.Builder builder, DiscoveryClient discoveryClient) {
        this.restClient = builder.build();
        this.discoveryClient = discoveryClient;
    }

    @Override
    public void run(String... args) {
        if (!service.isEmpty()) {
            scheduler.scheduleWithFixedDelay(this::callOnce, 0, intervalMs, TimeUnit.MILLISECONDS);
        }
    }

    private void callOnce() {
        try {
            String body = restClient.get().uri("http://" + service + path).retrieve().body(String.class);
            ok.incrementAndGet();
            byInstance.computeIfAbsent(body == null ? "" : body.trim(), k -> new AtomicLong()).incrementAndGet();
        } catch (RuntimeException e) {
            failed.incrementAndGet();
            lastError.set(e.getClass().getSimpleName() + ": " + e.getMessage());
        }
    }

    @GetMapping(value = "/stats", produces = "application/json")
    Map<String, Object> stats() {
        Map<String, Long> answered = new TreeMap<>();
        byInstance.forEach((k, v) -> answered.put(k, v.get()));
        return Map.of("ok", ok.get(), "failed", failed.get(), "lastError", lastError.get(), "byInstance", answered);
    }

    @GetMapping(value = "/discovery", produces = "application/json")
    Map<String, Object> discovery() {
        // The composite Spring Cloud puts in front: name the clients it asks.
        String client = discoveryClient instanceof CompositeDiscoveryClient composite
                ? String.join(", ", composite.getDiscoveryClients().stream().map(DiscoveryClient::description).toList())
                : discoveryClient.description();
        try {
            List<String> services = discoveryClient.getServices();
            List<Map<String, Object>> instances = discoveryClient.getInstances(service).stream()
                    .map(SpringK8sClientApplication::describe)
                    .toList();
            return Map.of("client", client, "services", services, "instances", instances, "error", "");
        } catch (RuntimeException e) {
            // What the DiscoveryClient threw, as its load balancer meets it.
            return Map.of("client", client, "services", List.of(), "instances", List.of(),
                    "error", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
    }

    private static Map<String, Object> describe(ServiceInstance in) {
        // The metadata Spring Cloud Kubernetes gives an instance: the
        // Service's labels and annotations among it.
        Map<String, String> metadata = in.getMetadata() == null ? Map.of() : in.getMetadata();
        return Map.of("host", in.getHost(), "port", in.getPort(), "uri", String.valueOf(in.getUri()), "metadata", metadata);
    }
}
