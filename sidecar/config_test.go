package sidecar

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
)

func validEnv() map[string]string {
	return map[string]string{
		EnvPodName: "orders-1", EnvPodNamespace: "shop", EnvPodUID: "3f2a9c1e-7b4d-4e8a-9c61-0a1b2c3d4e5f", EnvPodIP: "10.0.0.7",
		EnvAppName: "Orders", EnvPort: "8080", EnvEurekaURLs: "http://e1:8761/eureka, http://e2:8761/eureka",
		EnvMetadata: `{"zone":"a"}`, EnvClusterID: "c-1", EnvSyncer: "orders",
	}
}

func lookupFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseEnv_AppliesDefaults(t *testing.T) {
	cfg, err := ParseEnv(lookupFrom(validEnv()))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.VIPAddress != "orders" || cfg.Health.Type != HealthTCP || cfg.Health.Port != 8080 ||
		cfg.RenewalInterval != 30*time.Second || cfg.LeaseDuration != 90*time.Second || len(cfg.EurekaURLs) != 2 {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
}

func TestParseEnv_RejectsBadValuesNamingTheVariable(t *testing.T) {
	for _, tc := range []struct{ env, value, allowed string }{
		{EnvPort, "0", "1 to 65535"},
		{EnvPort, "70000", "1 to 65535"},
		{EnvSecurePort, "-1", "1 to 65535"},
		{EnvEurekaURLs, "eureka:8761", "http://"},
		{EnvEurekaURLs, ",", "at least one"},
		{EnvEurekaURLs, "http://e1:8761/eureka,http://orders:s3cret@e2:8761/eureka", "spec.eureka.credentialsSecretRef"},
		{EnvLeaseRenewalInterval, "-5s", "positive duration"},
		{EnvLeaseDuration, "10s", "longer than"},
		{EnvHealthFailureThreshold, "0", "1 to 2147483647"},
		{EnvMetadata, "[1]", "JSON object"},
		{EnvHealthType, "exec", "http or tcp"},
		{EnvHealthScheme, "ftp", "HTTP or HTTPS"},
		{EnvAppName, "", "required"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			env := validEnv()
			env[tc.env] = tc.value
			_, err := ParseEnv(lookupFrom(env))
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Name != tc.env || !strings.Contains(err.Error(), tc.allowed) {
				t.Fatalf("err = %v, want a ConfigError naming %s and saying %q", err, tc.env, tc.allowed)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("err = %v: it shows the URL's password", err)
			}
		})
	}
}

func TestParseEnv_FilesComeInPairs(t *testing.T) {
	for set, missing := range map[string]string{
		EnvEurekaUsernameFile: EnvEurekaPasswordFile, EnvEurekaPasswordFile: EnvEurekaUsernameFile,
		EnvEurekaClientCertFile: EnvEurekaClientKeyFile, EnvEurekaClientKeyFile: EnvEurekaClientCertFile,
	} {
		env := validEnv()
		env[set] = "/etc/eurekube/eureka/file"
		_, err := ParseEnv(lookupFrom(env))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Name != missing || !strings.Contains(err.Error(), set) {
			t.Errorf("only %s set: err = %v, want a ConfigError naming %s", set, err, missing)
		}
	}
}

func TestInstance_MarkersCannotBeForgedByUserMetadata(t *testing.T) {
	cfg, err := ParseEnv(lookupFrom(validEnv()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metadata[eureka.MetaCluster] = "someone-else"
	inst := cfg.Instance(eureka.StatusUp)
	if inst.Metadata[eureka.MetaCluster] != "c-1" || inst.Metadata["zone"] != "a" {
		t.Fatalf("metadata = %v", inst.Metadata)
	}
	if inst.InstanceID != "orders-1.shop.3f2a9c1e:orders:8080" || inst.HostName != "10.0.0.7" || inst.App != "ORDERS" {
		t.Fatalf("instance = %+v", inst)
	}
}

func TestEnv_ParsesBackToTheSameConfig(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"defaults": validEnv(),
		"every variable": func() map[string]string {
			env := validEnv()
			for k, v := range map[string]string{
				EnvNodeName: "node-1", EnvVIPAddress: "orders-vip", EnvSecureVIPAddress: "orders-secure", EnvSecurePort: "8443",
				EnvEurekaUsername: "u", EnvEurekaPassword: "p:w", EnvHealthType: "HTTP", EnvHealthScheme: "HTTPS", EnvHealthPath: "/ready",
				EnvHealthPort: "8081", EnvHealthPeriod: "10", EnvHealthTimeout: "500ms", EnvHealthFailureThreshold: "4",
				EnvHealthSuccessThreshold: "2", EnvTrafficFile: "/etc/eurekube/podinfo/traffic", EnvZoneFile: "/etc/eurekube/podinfo/zone", EnvLeaseRenewalInterval: "5s", EnvLeaseDuration: "15s", EnvRequestTimeout: "1s",
				EnvRetryMax: "2s", EnvShutdownTimeout: "3s", EnvListenAddr: "127.0.0.1:9999", EnvLogLevel: "debug",
				EnvEurekaUsernameFile: "/etc/eurekube/eureka/username", EnvEurekaPasswordFile: "/etc/eurekube/eureka/password",
				EnvEurekaCAFile: "/etc/eurekube/eureka/ca.crt", EnvEurekaClientCertFile: "/etc/eurekube/eureka/tls.crt",
				EnvEurekaClientKeyFile: "/etc/eurekube/eureka/tls.key", EnvGatewayTokenFile: "/var/run/secrets/eurekube.io/gateway/token",
			} {
				env[k] = v
			}
			return env
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := ParseEnv(lookupFrom(env))
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseEnv(LookupIn(cfg.Env()))
			if err != nil {
				t.Fatalf("rendered %v: %v", cfg.Env(), err)
			}
			if !reflect.DeepEqual(again, cfg) {
				t.Fatalf("parsed back %+v, want %+v", again, cfg)
			}
			if name != "every variable" {
				return
			}
			rendered := map[string]bool{}
			for _, e := range cfg.Env() {
				rendered[e.Name] = true
			}
			for _, name := range EnvNames() {
				if !rendered[name] {
					t.Errorf("%s is not rendered: set it in this case, so that its round trip is tested", name)
				}
			}
		})
	}
}

func TestDefaults_AreWhatAnUnsetVariableMeans(t *testing.T) {
	cfg, err := ParseEnv(lookupFrom(validEnv()))
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults("Orders", 8080)
	if cfg.Health != want.Health || cfg.VIPAddress != want.VIPAddress || cfg.SecureVIPAddress != want.SecureVIPAddress ||
		cfg.RenewalInterval != want.RenewalInterval || cfg.LeaseDuration != want.LeaseDuration || cfg.RequestTimeout != want.RequestTimeout ||
		cfg.RetryMax != want.RetryMax || cfg.ShutdownTimeout != want.ShutdownTimeout || cfg.ListenAddr != want.ListenAddr || cfg.LogLevel != want.LogLevel ||
		cfg.TrafficFile != want.TrafficFile {
		t.Fatalf("parsed %+v, want the defaults %+v", cfg, want)
	}
}

// FuzzParseEnv feeds NAME=value lines: whatever ParseEnv accepts, Env
// renders so that ParseEnv reads back the same Config.
func FuzzParseEnv(f *testing.F) {
	var seed strings.Builder
	for k, v := range validEnv() {
		seed.WriteString(k + "=" + v + "\n")
	}
	f.Add(seed.String())
	f.Add(seed.String() + EnvHealthType + "=http\n" + EnvHealthPath + "=/x\n" + EnvHealthPeriod + "=7\n")
	f.Add(seed.String() + EnvMetadata + "={}\n" + EnvEurekaURLs + "=http://a, ,https://b:1/x\n")
	f.Add(seed.String() + EnvTrafficFile + "= /etc/eurekube/podinfo/traffic \n")
	f.Add(seed.String() + EnvEurekaUsernameFile + "=/u\n" + EnvEurekaPasswordFile + "=/p\n" + EnvEurekaCAFile + "=/ca\n" +
		EnvEurekaClientCertFile + "=/c\n" + EnvEurekaClientKeyFile + "=/k\n")
	f.Add(seed.String() + EnvGatewayTokenFile + "= /var/run/secrets/eurekube.io/gateway/token \n")
	f.Fuzz(func(t *testing.T, lines string) {
		env := map[string]string{}
		for _, line := range strings.Split(lines, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		cfg, err := ParseEnv(lookupFrom(env))
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			return
		}
		again, err := ParseEnv(LookupIn(cfg.Env()))
		if err != nil {
			t.Fatalf("rendered %q: %v", cfg.Env(), err)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("parsed back %+v, want %+v", again, cfg)
		}
	})
}
