package io.eurekube.eureka;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Base64;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.stereotype.Component;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * HTTP basic auth in front of every request, as teams protect their Eureka
 * servers, for the tests of credentials and their rotation. Off unless the
 * property eurekube.auth.username is set (the harness sets it with
 * eurekube.auth.password); a plain filter rather than Spring Security, so the
 * server needs no other dependency and starts as fast as before. A request
 * without the right credentials gets 401 with a Basic challenge, as Spring
 * Security answers. First of all filters: Eureka's Jersey runs as a filter
 * too and answers without passing the request on.
 */
@Component
@Order(Ordered.HIGHEST_PRECEDENCE)
@ConditionalOnProperty(name = "eurekube.auth.username")
public class BasicAuthFilter extends OncePerRequestFilter {
    private final byte[] expected;

    public BasicAuthFilter(@Value("${eurekube.auth.username}") String username,
                           @Value("${eurekube.auth.password:}") String password) {
        this.expected = ("Basic " + Base64.getEncoder().encodeToString(
                (username + ":" + password).getBytes(StandardCharsets.UTF_8))).getBytes(StandardCharsets.UTF_8);
    }

    @Override
    protected void doFilterInternal(HttpServletRequest req, HttpServletResponse resp, FilterChain chain)
            throws ServletException, IOException {
        String given = req.getHeader("Authorization");
        if (given != null && MessageDigest.isEqual(expected, given.getBytes(StandardCharsets.UTF_8))) {
            chain.doFilter(req, resp);
            return;
        }
        resp.setHeader("WWW-Authenticate", "Basic realm=\"eureka\"");
        resp.sendError(HttpServletResponse.SC_UNAUTHORIZED, "bad credentials");
    }
}
