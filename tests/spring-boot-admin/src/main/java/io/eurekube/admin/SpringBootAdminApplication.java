package io.eurekube.admin;

import de.codecentric.boot.admin.server.config.EnableAdminServer;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * A plain Spring Boot Admin server, as teams run it, for Eurekube's tests:
 * it finds the instances it monitors through Spring Cloud's Eureka
 * DiscoveryClient and polls each one's health URL.
 */
@SpringBootApplication
@EnableAdminServer
public class SpringBootAdminApplication {
    public static void main(String[] args) {
        SpringApplication.run(SpringBootAdminApplication.class, args);
    }
}
